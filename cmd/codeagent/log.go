package main

import (
	"context"
	"errors"
	"fmt"
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
	if code, done := parseFlags(fs, args); done {
		return code
	}
	if fs.NArg() != 0 {
		return exitCodeFor(s.err, usagef("log takes no arguments"))
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
		n, err := st.VerifyAudit(ctx)
		var ce *store.ChainError
		if errors.As(err, &ce) {
			return fmt.Errorf("%w (%d records before it are intact)", err, n)
		}
		if err != nil {
			return err
		}
		recs, _ := st.AuditLog(ctx, "")
		head := "none"
		if len(recs) > 0 {
			head = recs[len(recs)-1].Hash
		}
		fmt.Fprintf(s.out, "audit log intact: %d records, head %s\n", n, head)
		return nil
	}
	recs, err := st.AuditLog(ctx, session)
	if err != nil {
		return err
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
