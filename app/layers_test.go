package app

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/sandbox/ratelimit"
	"github.com/codeagent/codeagent/store"
)

// countingBackend counts the executions that reach it.
type countingBackend struct{ runs atomic.Int32 }

func (b *countingBackend) Run(context.Context, sandbox.Spec) (sandbox.Result, error) {
	b.runs.Add(1)
	return sandbox.Result{Status: sandbox.StatusOK}, nil
}
func (*countingBackend) Close() error { return nil }

// TestExecLayersOrder: a door's execution goes through its layers in
// sandbox.Stack's order. Waiting for a worker, it has passed the rate
// limit and is in the audit log, and has not reached the backend; one the
// rate limit refuses is neither recorded nor queued (the queue counts no
// execution for it) nor run.
func TestExecLayersOrder(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "codeagent.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	backend := &countingBackend{}
	e := NewExecutions(backend, 1, 1)
	x, err := StartExec(ctx, ExecRequest{Store: st, Session: "s", Sandbox: e.Sandbox("exec", true),
		Limit: NewSessionLimit(1), MaxWait: 50 * time.Millisecond, Audit: AuditRecord{Kind: "exec_request", Data: map[string]any{}}})
	if err != nil {
		t.Fatal(err)
	}
	kinds := func() []string {
		recs, err := st.AuditLog(ctx, "s")
		if err != nil {
			t.Fatal(err)
		}
		var k []string
		for _, r := range recs {
			k = append(k, r.Kind)
		}
		return k
	}
	spec := sandbox.Spec{Command: []string{"true"}}

	release, err := e.Queue().Acquire(ctx, true) // the only worker
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := x.Run(ctx, spec); done <- err }()
	deadline := time.Now().Add(10 * time.Second)
	for _, _, _, waiting := e.Queue().Stats(); waiting < 1; _, _, _, waiting = e.Queue().Stats() {
		if time.Now().After(deadline) {
			t.Fatal("the execution never waited in the queue")
		}
		time.Sleep(time.Millisecond)
	}
	if k := kinds(); !slices.Equal(k, []string{"exec_request", store.KindExecStart}) || backend.runs.Load() != 0 {
		t.Fatalf("waiting for a worker: audit log %q, %d runs; want its exec_start and no run", k, backend.runs.Load())
	}
	release()
	if err := <-done; err != nil || backend.runs.Load() != 1 {
		t.Fatalf("first execution: %v, %d runs", err, backend.runs.Load())
	}

	_, err = x.Run(ctx, spec)
	var le *ratelimit.LimitError
	if !errors.As(err, &le) {
		t.Fatalf("a second execution over a limit of 1 a minute: %v, want a *ratelimit.LimitError", err)
	}
	if k := kinds(); !slices.Equal(k, []string{"exec_request", store.KindExecStart, store.KindExecEnd}) || backend.runs.Load() != 1 {
		t.Fatalf("refused by the rate limit: audit log %q, %d runs; want nothing more", k, backend.runs.Load())
	}
	var w bytes.Buffer
	e.WriteMetrics(&w)
	for _, line := range strings.Split(w.String(), "\n") {
		if strings.HasPrefix(line, "codeagent_executions_total{") && line != `codeagent_executions_total{source="exec",status="ok"} 1` {
			t.Errorf("the refused execution was counted by the queue: %s", line)
		}
	}
}
