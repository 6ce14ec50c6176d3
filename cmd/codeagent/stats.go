package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/codeagent/codeagent/store"
	"github.com/codeagent/codeagent/termtext"
)

func cmdStats(ctx context.Context, s stdio, args []string) int {
	fs := newFlagSet("stats", s)
	dir := dataDirFlag(fs)
	session := fs.String("session", "", "only this session (default: every session)")
	asJSON := fs.Bool("json", false, "print JSON")
	if code, done := parseNoArgs(fs, args, s); done {
		return code
	}
	return exitCodeFor(s.err, runStats(ctx, s, *dir, *session, *asJSON))
}

func runStats(ctx context.Context, s stdio, dataDir, session string, asJSON bool) error {
	st, _, err := openDataStore(ctx, dataDir)
	if err != nil {
		return err
	}
	defer st.Close()
	var sessions []store.Session
	if session != "" {
		one, err := st.SessionByName(ctx, session)
		if err != nil {
			return notFoundIsUsage(err)
		}
		sessions = []store.Session{one}
	} else if sessions, err = st.Sessions(ctx); err != nil {
		return err
	}
	var all []store.Stats
	for _, sess := range sessions {
		x, err := st.SessionStats(ctx, sess.ID, sess.Name)
		if err != nil {
			return err
		}
		all = append(all, x)
	}
	if asJSON {
		if all == nil {
			all = []store.Stats{}
		}
		return writeJSON(s.out, all)
	}
	for _, x := range all {
		printStats(s.out, x)
	}
	return nil
}

func printStats(w io.Writer, x store.Stats) {
	fmt.Fprintf(w, "session %s\n", termtext.Name(x.Session))
	fmt.Fprintf(w, "  tasks:              %d (%d succeeded, %.0f%%)\n", x.Turns, x.Succeeded, 100*x.OverallSuccesses)
	fmt.Fprintf(w, "  first-try success:  %.0f%% (%d)\n", 100*x.FirstTrySuccess, x.FirstTry)
	fmt.Fprintf(w, "  attempts per task:  %.2f\n", x.AttemptsPerTurn)
	fmt.Fprintf(w, "  time in model:      %s\n", x.ModelTime.Round(time.Millisecond))
	fmt.Fprintf(w, "  time in sandbox:    %s (CPU %s, peak memory %d MiB)\n", x.SandboxTime.Round(time.Millisecond), x.ExecCPU.Round(time.Millisecond), x.PeakMemory>>20)
	fmt.Fprintf(w, "  tokens:             %d in, %d out\n", x.InputTokens, x.OutputTokens)
	if len(x.ErrorClasses) > 0 {
		classes := make([]string, 0, len(x.ErrorClasses))
		for c := range x.ErrorClasses {
			classes = append(classes, c)
		}
		sort.Strings(classes)
		fmt.Fprint(w, "  error classes:     ")
		for _, c := range classes {
			fmt.Fprintf(w, " %s=%d", c, x.ErrorClasses[c])
		}
		fmt.Fprintln(w)
	}
}
