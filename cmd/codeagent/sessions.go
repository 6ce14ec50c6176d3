package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/codeagent/codeagent/store"
	"github.com/codeagent/codeagent/termtext"
)

func cmdSessions(ctx context.Context, s stdio, args []string) int {
	fs := newFlagSet("sessions", s)
	fs.Usage = func() {
		fmt.Fprintln(s.err, "usage: codeagent sessions list|show NAME|rm NAME|prune --older-than 7d [flags]\n\nflags:")
		printFlags(fs)
	}
	dir := dataDirFlag(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	olderThan := fs.String("older-than", "", "with prune: remove sessions unused for this long (e.g. 7d, 36h)")
	verb, names, code, done := parseVerb(fs, s, args, "sessions needs what to do: list, show NAME, rm NAME or prune --older-than AGE")
	if done {
		return code
	}
	err := runSessions(ctx, s, sessionsOptions{Verb: verb, Names: names, DataDir: *dir, JSON: *asJSON, OlderThan: *olderThan})
	return exitCodeFor(s.err, err)
}

type sessionsOptions struct {
	Verb, DataDir, OlderThan string
	Names                    []string
	JSON                     bool
}

func runSessions(ctx context.Context, s stdio, o sessionsOptions) error {
	want := map[string]int{"list": 0, "show": 1, "rm": 1, "prune": 0}
	n, ok := want[o.Verb]
	if !ok {
		return usagef("unknown sessions command %q (want list, show, rm or prune)", o.Verb)
	}
	if len(o.Names) != n {
		return usagef("sessions %s takes %d name(s)", o.Verb, n)
	}
	st, dataDir, err := openDataStore(ctx, o.DataDir)
	if err != nil {
		return err
	}
	defer st.Close()
	switch o.Verb {
	case "list":
		list, err := st.Sessions(ctx)
		if err != nil {
			return err
		}
		if o.JSON {
			return writeJSON(s.out, list)
		}
		tw := tabwriter.NewWriter(s.out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tTURNS\tLAST USED\tWORKSPACE")
		for _, x := range list {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", termtext.Name(x.Name), x.Turns, x.UpdatedAt.Format(time.DateTime), termtext.Name(x.Workspace))
		}
		return tw.Flush()
	case "show":
		return showSession(ctx, s.out, st, o.Names[0], o.JSON)
	case "rm":
		sess, err := st.SessionByName(ctx, o.Names[0])
		if err != nil {
			return notFoundIsUsage(err)
		}
		// Under the session's lease: a session a live process is running
		// is refused, and none can start while it goes.
		if err := st.RemoveSession(ctx, sess, func(sess store.Session) error {
			if err := removeSessionDir(dataDir, sess.Name); err != nil {
				return fmt.Errorf("remove workspace: %w", err)
			}
			return nil
		}); err != nil {
			return err
		}
		fmt.Fprintf(s.out, "removed session %s\n", termtext.Name(sess.Name))
		return nil
	}
	age, err := parseAge(o.OlderThan)
	if err != nil {
		return err
	}
	names, skipped, err := st.PruneSessions(ctx, time.Now().Add(-age), func(sess store.Session) error {
		if strings.HasPrefix(sess.Name, "@") { // the server's: beneath server/
			return removeServerSessionDir(dataDir, sess.Workspace)
		}
		return removeSessionDir(dataDir, sess.Name)
	})
	for _, n := range names {
		fmt.Fprintf(s.out, "removed session %s\n", termtext.Name(n))
	}
	for _, h := range skipped {
		fmt.Fprintf(s.out, "kept session %s: in use by %s\n", termtext.Name(h.Session), h.Holder.Owner.Describe())
	}
	return err
}

func notFoundIsUsage(err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return usageError{err}
	}
	return err
}

// parseAge reads durations such as 7d, 36h or 90m.
func parseAge(s string) (time.Duration, error) {
	if s == "" {
		return 0, usagef("prune needs --older-than, e.g. --older-than 7d")
	}
	v, err := parseDuration(s)
	if err != nil {
		return 0, usagef("invalid --older-than %q: use e.g. 7d, 36h or 90m", s)
	}
	return v, nil
}

// parseDuration reads a duration that is not negative, in days too: 7d,
// 1.5d, 36h, 90m.
func parseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if d, ok := strings.CutSuffix(s, "d"); ok {
		var days float64
		if _, err := fmt.Sscanf(d, "%g", &days); err == nil && days >= 0 {
			return time.Duration(days * 24 * float64(time.Hour)), nil
		}
	}
	v, err := time.ParseDuration(s)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("invalid duration %q", s)
	}
	return v, nil
}

func showSession(ctx context.Context, w io.Writer, st *store.Store, name string, asJSON bool) error {
	sess, err := st.SessionByName(ctx, name)
	if err != nil {
		return notFoundIsUsage(err)
	}
	turns, err := st.Turns(ctx, sess.ID)
	if err != nil {
		return err
	}
	if asJSON {
		return writeJSON(w, map[string]any{"session": sess, "turns": turns})
	}
	fmt.Fprintf(w, "session %s (workspace %s)\n", termtext.Name(sess.Name), termtext.Name(sess.Workspace))
	for _, t := range turns {
		fmt.Fprintf(w, "\nturn %d · %s · %d attempt(s) · %s\n  task: %s\n", t.Seq, t.Status, t.Attempts, t.StartedAt.Format(time.DateTime), termtext.Name(t.Task))
		for _, a := range t.Artifacts {
			fmt.Fprintf(w, "  artifact: %s (%d bytes)\n", termtext.Name(a.Path), a.Size)
		}
	}
	return nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
