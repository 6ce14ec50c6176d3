package app

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/codeagent/codeagent/sandbox"
)

// blocking is a backend whose runs wait for release.
type blocking struct{ release chan struct{} }

func (b blocking) Run(ctx context.Context, _ sandbox.Spec) (sandbox.Result, error) {
	select {
	case <-b.release:
	case <-ctx.Done():
		return sandbox.Result{}, ctx.Err()
	}
	return sandbox.Result{Status: sandbox.StatusOK}, nil
}
func (blocking) Close() error { return nil }

// TestExecutionsShareOneQueue: the doors' sandboxes of one Executions take
// the same worker slots: with one worker and one waiting place, a third
// bounded execution from another door is refused with a *QueueFullError
// and counted; each finished execution is counted under its door.
func TestExecutionsShareOneQueue(t *testing.T) {
	b := blocking{release: make(chan struct{})}
	e := NewExecutions(b, 1, 1)
	ctx := context.Background()
	done := make(chan error, 2)
	go func() { _, err := e.Sandbox("exec", true).Run(ctx, sandbox.Spec{}); done <- err }()
	for w, busy, _, _ := e.Queue().Stats(); busy < 1 || w != 1; w, busy, _, _ = e.Queue().Stats() {
		time.Sleep(time.Millisecond)
	}
	go func() { _, err := e.Sandbox("mcp", true).Run(ctx, sandbox.Spec{}); done <- err }()
	for _, _, _, waiting := e.Queue().Stats(); waiting < 1; _, _, _, waiting = e.Queue().Stats() {
		time.Sleep(time.Millisecond)
	}
	_, err := e.Sandbox("mcp", true).Run(ctx, sandbox.Spec{})
	var qf *QueueFullError
	if !errors.As(err, &qf) {
		t.Fatalf("a third execution with one worker and one place: %v", err)
	}
	close(b.release)
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	var w bytes.Buffer
	e.WriteMetrics(&w)
	for _, want := range []string{`codeagent_executions_total{source="exec",status="ok"} 1`, `codeagent_executions_total{source="mcp",status="ok"} 1`,
		"codeagent_executions_rejected_total 1", "codeagent_exec_workers 1", "codeagent_exec_queue_capacity 1"} {
		if !strings.Contains(w.String(), want) {
			t.Errorf("metrics lack %q:\n%s", want, w.String())
		}
	}
}

// TestNotRunIsNotCounted: a run that says no execution took place (a
// kernel refused the cell) returns its error and is counted nowhere.
func TestNotRunIsNotCounted(t *testing.T) {
	e := NewExecutions(blocking{}, 1, 1)
	busy := errors.New("the kernel is busy")
	_, err := e.Do(context.Background(), "kernel", true, func() (sandbox.Result, error) {
		return sandbox.Result{}, NotRun{Err: busy}
	})
	var w bytes.Buffer
	e.WriteMetrics(&w)
	if err != busy || strings.Contains(w.String(), `source="kernel"`) {
		t.Fatalf("err %v, metrics:\n%s", err, w.String())
	}
}
