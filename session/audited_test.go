package session

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/codeagent/codeagent/agent"
	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/store"
)

type countingSandbox struct{ runs int }

func (c *countingSandbox) Run(context.Context, sandbox.Spec) (sandbox.Result, error) {
	c.runs++
	return sandbox.Result{Status: sandbox.StatusOK}, nil
}
func (c *countingSandbox) Close() error { return nil }

// TestAuditedFailsClosed: each execution is recorded before and after it
// runs, numbered within the run; once a record cannot be written, nothing
// more runs.
func TestAuditedFailsClosed(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "codeagent.db"))
	if err != nil {
		t.Fatal(err)
	}
	rec := NewRecorder(ctx, st, "s", "", "run1", nil)
	inner := &countingSandbox{}
	sb := Audited(inner, rec)
	if _, err := sb.Run(ctx, sandbox.Spec{Command: []string{"true"}}); err != nil || inner.runs != 1 {
		t.Fatalf("first execution: %v, %d runs", err, inner.runs)
	}
	recs, _ := st.AuditLog(ctx, "s")
	if len(recs) != 2 || recs[0].Kind != store.KindExecStart || recs[0].RunSeq != 1 || recs[1].Kind != store.KindExecEnd || recs[1].RunSeq != 2 {
		t.Fatalf("records %+v", recs)
	}
	st.Close() // every later write fails
	rec.Event(agent.Event{Type: agent.EventGenerated, Code: "print(1)"})
	_, err = sb.Run(ctx, sandbox.Spec{Command: []string{"true"}})
	var ae *AuditError
	if !errors.As(err, &ae) || inner.runs != 1 {
		t.Fatalf("after a lost record: %v, %d runs", err, inner.runs)
	}
	if rec.Err() == nil {
		t.Fatal("the lost record was not remembered")
	}
}
