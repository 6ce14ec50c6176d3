package main

import (
	"context"
	"errors"
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
	session := fs.String("session", "", "only this session (or the runs of this MCP session); default: every run, in a session or not")
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
	all, err := collectStats(ctx, st, session)
	if err != nil {
		return err
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

// collectStats returns the Stats of every session and then of the runs
// made outside any (see store.StatsOutsideSessions), or only those of
// session: a session's, else an MCP session's runs; neither is a usage
// error.
func collectStats(ctx context.Context, st *store.Store, session string) ([]store.Stats, error) {
	var sessions []store.Session
	var err error
	if session != "" {
		one, err := st.SessionByName(ctx, session)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return nil, err
		}
		if err == nil {
			sessions = []store.Session{one}
		}
	} else if sessions, err = st.Sessions(ctx); err != nil {
		return nil, err
	}
	var all []store.Stats
	for _, sess := range sessions {
		x, err := st.SessionStats(ctx, sess.ID, sess.Name)
		if err != nil {
			return nil, err
		}
		all = append(all, x)
	}
	if session != "" && len(all) > 0 {
		return all, nil
	}
	outside, err := st.StatsOutsideSessions(ctx)
	if err != nil {
		return nil, err
	}
	for _, x := range outside {
		if session == "" || x.Session == session {
			all = append(all, x)
		}
	}
	if session != "" && len(all) == 0 {
		return nil, usageError{fmt.Errorf("session %q: %w", session, store.ErrNotFound)}
	}
	return all, nil
}

func printStats(w io.Writer, x store.Stats) {
	switch {
	case x.FromAuditLog && x.Session == "":
		fmt.Fprintln(w, "runs without a session")
	case x.FromAuditLog:
		fmt.Fprintf(w, "session %s (MCP)\n", termtext.Name(x.Session))
	default:
		fmt.Fprintf(w, "session %s\n", termtext.Name(x.Session))
	}
	fmt.Fprintf(w, "  tasks:              %d (%d succeeded, %.0f%%)\n", x.Turns, x.Succeeded, 100*x.OverallSuccesses)
	fmt.Fprintf(w, "  first-try success:  %.0f%% (%d)\n", 100*x.FirstTrySuccess, x.FirstTry)
	fmt.Fprintf(w, "  attempts per task:  %.2f\n", x.AttemptsPerTurn)
	fmt.Fprintf(w, "  time in model:      %s\n", x.ModelTime.Round(time.Millisecond))
	fmt.Fprintf(w, "  time in sandbox:    %s (CPU %s, peak memory %d MiB)\n", x.SandboxTime.Round(time.Millisecond), x.ExecCPU.Round(time.Millisecond), x.PeakMemory>>20)
	if x.FromAuditLog {
		fmt.Fprintln(w, "  tokens:             not recorded outside sessions")
	} else {
		fmt.Fprintf(w, "  tokens:             %d in, %d out\n", x.InputTokens, x.OutputTokens)
	}
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
