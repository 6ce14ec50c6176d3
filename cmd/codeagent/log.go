package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/codeagent/codeagent/store"
	"github.com/codeagent/codeagent/termtext"
)

func cmdLog(ctx context.Context, s stdio, args []string) int {
	fs := newFlagSet("log", s)
	dir := dataDirFlag(fs)
	var f store.AuditFilter
	fs.StringVar(&f.Session, "session", "", "only this session's records")
	fs.StringVar(&f.Run, "run", "", "only this run's records: its ID, or the start of it that the RUN column shows")
	fs.Var(sinceFlag{t: &f.Since, now: time.Now}, "since", "only records from this time on: an RFC 3339 time (2026-05-01T09:00:00Z) or how long ago (2h, 7d)")
	intVar(fs, &f.Tail, "tail", 0, 0, 1<<30, "only the last N records (of those the other flags select; 0: all)")
	asJSON := fs.Bool("json", false, "print the records as JSON")
	verify := fs.Bool("verify", false, "check the hash chain of the whole log (the flags that select records do not apply)")
	if code, done := parseNoArgs(fs, args, s); done {
		return code
	}
	return exitCodeFor(s.err, runLog(ctx, s, *dir, f, *asJSON, *verify))
}

// sinceFlag is --since: a time, or a duration before now.
type sinceFlag struct {
	t   *time.Time
	now func() time.Time
}

func (f sinceFlag) String() string {
	if f.t == nil || f.t.IsZero() {
		return ""
	}
	return f.t.Format(time.RFC3339)
}

func (f sinceFlag) Set(s string) error {
	if t, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(s)); err == nil {
		*f.t = t
		return nil
	}
	d, err := parseDuration(s)
	if err != nil {
		return errors.New("want an RFC 3339 time such as 2026-05-01T09:00:00Z, or a duration such as 90m, 2h or 7d")
	}
	*f.t = f.now().Add(-d)
	return nil
}

func runLog(ctx context.Context, s stdio, dataDir string, f store.AuditFilter, asJSON, verify bool) error {
	st, _, err := openDataStore(ctx, dataDir)
	if err != nil {
		return err
	}
	defer st.Close()
	if verify {
		return verifyLog(ctx, s, st)
	}
	recs, err := st.AuditRecords(ctx, f)
	if err != nil {
		return err
	}
	if len(recs) == 0 {
		if err := knownSelection(ctx, st, f); err != nil {
			return err
		}
	}
	if asJSON {
		if recs == nil {
			recs = []store.Record{}
		}
		return writeJSON(s.out, recs)
	}
	tw := tabwriter.NewWriter(s.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tTIME\tSESSION\tRUN\tKIND\tDATA")
	for _, r := range recs {
		data := string(r.Data)
		if len(data) > 100 {
			data = data[:100] + "…"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", r.Seq, r.Time.Format(time.DateTime), termtext.Name(r.Session),
			termtext.Name(shortID(r.RunID)), termtext.Name(r.Kind), termtext.Name(data))
	}
	return tw.Flush()
}

// knownSelection says, when f selected no record, whether it named a
// session or a run that is not there: a mistyped name or ID is a usage
// error (exit 2), as stats says it. Records may name a session that is
// not in the store (an MCP session's label).
func knownSelection(ctx context.Context, st *store.Store, f store.AuditFilter) error {
	if f.Session != "" {
		recs, err := st.AuditRecords(ctx, store.AuditFilter{Session: f.Session, Tail: 1})
		if err != nil {
			return err
		}
		if len(recs) == 0 {
			if _, err := st.SessionByName(ctx, f.Session); err != nil {
				return notFoundIsUsage(err)
			}
		}
	}
	if f.Run != "" {
		recs, err := st.AuditRecords(ctx, store.AuditFilter{Run: f.Run, Tail: 1})
		if err == nil && len(recs) == 0 {
			err = usagef("run %q: no records (see the RUN column of 'codeagent log')", f.Run)
		}
		return err
	}
	return nil
}

func shortID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

// verifyLog checks the hash chain (an edited, inserted or deleted record)
// and then that no run's records are missing: a hole in a run's numbers,
// an execution that started and has no end. An execution whose end is
// unknown because its process died is reported, and does not fail.
func verifyLog(ctx context.Context, s stdio, st *store.Store) error {
	n, err := st.VerifyAudit(ctx)
	var ce *store.ChainError
	if errors.As(err, &ce) {
		return fmt.Errorf("%w (%d records before it are intact)", err, n)
	}
	if err != nil {
		return err
	}
	gaps, err := st.AuditGaps(ctx)
	if err != nil {
		return err
	}
	var lost, notes []string
	for _, g := range gaps {
		if g.Explained {
			notes = append(notes, "  "+termtext.Name(g.String()))
		} else {
			lost = append(lost, "  "+termtext.Name(g.String()))
		}
	}
	if len(lost) > 0 {
		return fmt.Errorf("audit log incomplete: the chain of its %d records is intact, but %d gap(s) show records that are missing:\n%s",
			n, len(lost), strings.Join(append(lost, notes...), "\n"))
	}
	recs, _ := st.AuditLog(ctx, "")
	head := "none"
	if len(recs) > 0 {
		head = recs[len(recs)-1].Hash
	}
	fmt.Fprintf(s.out, "audit log intact: %d records, head %s\n", n, head)
	if len(notes) > 0 {
		fmt.Fprintf(s.out, "%d execution(s) of runs whose process died have no end:\n%s\n", len(notes), strings.Join(notes, "\n"))
	}
	return nil
}
