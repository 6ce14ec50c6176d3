package session

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/codeagent/codeagent/agent"
	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/sandbox/ratelimit"
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

type egressSandbox struct{}

func (egressSandbox) Run(_ context.Context, spec sandbox.Spec) (sandbox.Result, error) {
	return sandbox.Result{Status: sandbox.StatusOK, Egress: &sandbox.Egress{Allow: spec.Network.Allow,
		Connections: []sandbox.Connection{{Method: "CONNECT", Host: "evil.test", Port: 443, Reason: "not in the allow list"}}}}, nil
}
func (egressSandbox) Close() error { return nil }

// TestAuditedNetwork: exec_start names the network an execution is given
// (and the test overrides of DNS), exec_end every connection attempt.
func TestAuditedNetwork(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "codeagent.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	sb := Audited(egressSandbox{}, NewRecorder(ctx, st, "s", "", "run1", nil))
	nw := &sandbox.Network{Allow: []string{"api.test"}, MaxBytes: 1 << 20, Resolve: map[string]string{"api.test": "127.0.0.1:9"}}
	if _, err := sb.Run(ctx, sandbox.Spec{Command: []string{"true"}, Network: nw}); err != nil {
		t.Fatal(err)
	}
	recs, _ := st.AuditLog(ctx, "s")
	if len(recs) != 2 {
		t.Fatalf("records %+v", recs)
	}
	start, end := string(recs[0].Data), string(recs[1].Data)
	if !strings.Contains(start, `"network":{"allow":["api.test"],"max_bytes":1048576,"resolve":{"api.test":"127.0.0.1:9"}}`) {
		t.Errorf("exec_start: %s", start)
	}
	if !strings.Contains(end, `"host":"evil.test"`) || !strings.Contains(end, `"allowed":false`) {
		t.Errorf("exec_end: %s", end)
	}
}

type weakSandbox struct{ weak []string }

func (w weakSandbox) Run(context.Context, sandbox.Spec) (sandbox.Result, error) {
	return sandbox.Result{Status: sandbox.StatusOK, WeakIsolation: w.weak}, nil
}
func (weakSandbox) Close() error { return nil }

// TestAuditedWeakIsolation: an execution that ran with weaker isolation
// than required, accepted by the caller (--allow-weak-isolation), says
// what in its exec_end record and in the agent's executed record; one that
// ran fully isolated says nothing of it.
func TestAuditedWeakIsolation(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "codeagent.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rec := NewRecorder(ctx, st, "s", "", "run1", nil)
	weak := []string{"ptrace: ptrace attached to PID 1"}
	for _, w := range [][]string{nil, weak} {
		if _, err := Audited(weakSandbox{weak: w}, rec).Run(ctx, sandbox.Spec{Command: []string{"true"}}); err != nil {
			t.Fatal(err)
		}
	}
	res := sandbox.Result{Status: sandbox.StatusOK, WeakIsolation: weak}.JSON()
	rec.Event(agent.Event{Type: agent.EventExecuted, Result: &res})
	recs, _ := st.AuditLog(ctx, "s")
	var ends []string
	for _, r := range recs {
		if r.Kind == store.KindExecEnd || r.Kind == "executed" {
			ends = append(ends, string(r.Data))
		}
	}
	if len(ends) != 3 || strings.Contains(ends[0], "weak_isolation") ||
		!strings.Contains(ends[1], `"weak_isolation":["ptrace: ptrace attached to PID 1"]`) ||
		!strings.Contains(ends[2], `"weak_isolation":["ptrace: ptrace attached to PID 1"]`) {
		t.Fatalf("records: %q", ends)
	}
}

// TestRunLimitBeforeAudit: a run's sandbox records an execution once its
// rate limit admits it (sandbox.Stack's order): one the limit refuses is
// neither recorded nor run.
func TestRunLimitBeforeAudit(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "codeagent.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	inner := &countingSandbox{}
	r, err := Start(ctx, Options{Store: st, Label: "mcp-x", Task: "t", Sandbox: inner, PerMinute: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	spec := sandbox.Spec{Command: []string{"true"}}
	if _, err := r.Sandbox.Run(ctx, spec); err != nil || inner.runs != 1 {
		t.Fatalf("first execution: %v, %d runs", err, inner.runs)
	}
	sctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	_, err = r.Sandbox.Run(sctx, spec)
	var le *ratelimit.LimitError
	if !errors.As(err, &le) || inner.runs != 1 {
		t.Fatalf("second execution over 1 a minute: %v, %d runs; want a *ratelimit.LimitError and no run", err, inner.runs)
	}
	recs, _ := st.AuditLog(ctx, "mcp-x")
	var kinds []string
	for _, rec := range recs {
		kinds = append(kinds, rec.Kind)
	}
	if !slices.Equal(kinds, []string{store.KindExecStart, store.KindExecEnd}) {
		t.Fatalf("records %q; want the first execution's alone", kinds)
	}
}
