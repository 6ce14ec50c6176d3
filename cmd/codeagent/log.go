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
	session := fs.String("session", "", "only this session's records")
	asJSON := fs.Bool("json", false, "print the records as JSON")
	verify := fs.Bool("verify", false, "check the hash chain of the whole log")
	if code, done := parseNoArgs(fs, args, s); done {
		return code
	}
	return exitCodeFor(s.err, runLog(ctx, s, *dir, *session, *asJSON, *verify))
}

func runLog(ctx context.Context, s stdio, dataDir, session string, asJSON, verify bool) error {
	st, _, err := openDataStore(ctx, dataDir)
	if err != nil {
		return err
	}
	defer st.Close()
	if verify {
		return verifyLog(ctx, s, st)
	}
	recs, err := st.AuditLog(ctx, session)
	if err != nil {
		return err
	}
	if session != "" && len(recs) == 0 {
		// No records, and no such session either: a mistyped name is said
		// (exit 2), as stats says it. Records may name a session that is
		// not in the store (an MCP session's label).
		if _, err := st.SessionByName(ctx, session); err != nil {
			return notFoundIsUsage(err)
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
