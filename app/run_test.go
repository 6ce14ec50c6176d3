package app

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/codeagent/codeagent/agent"
	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/sandbox/ratelimit"
	"github.com/codeagent/codeagent/store"
)

// okSandbox runs nothing and says so.
type okSandbox struct{}

func (okSandbox) Run(context.Context, sandbox.Spec) (sandbox.Result, error) {
	return sandbox.Result{Status: sandbox.StatusOK}, nil
}
func (okSandbox) Close() error { return nil }

// TestStartRunOutsideASession: a run outside any session (MCP's run_task)
// is audited under its label, its request record first, and counts its
// executions in the bucket it is given, shared with the door's other
// calls: a bucket already spent refuses the run's execution.
func TestStartRunOutsideASession(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "codeagent.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	limit := NewSessionLimit(1)
	if r, err := limit.bucket.Take(ctx, 0); err != nil || !r.OK {
		t.Fatalf("take the bucket's one token: %+v %v", r, err)
	}
	rs := &Runs{Store: st, Checkers: &Checkers{}}
	run, err := rs.StartRun(ctx, RunRequest{Task: "t", Label: "mcp-x", Sandbox: okSandbox{}, Limit: limit,
		Audit: AuditRecord{Kind: "run_task", Data: map[string]any{"task": "t"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	recs, err := st.AuditLog(ctx, "mcp-x")
	if err != nil || len(recs) != 1 || recs[0].Kind != "run_task" || recs[0].RunID != run.ID {
		t.Fatalf("audit log of mcp-x = %+v, %v; want the run_task record first", recs, err)
	}
	sctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	_, err = run.sr.Sandbox.Run(sctx, sandbox.Spec{Command: []string{"true"}})
	var le *ratelimit.LimitError
	if !errors.As(err, &le) && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("an execution over the shared bucket: %v, want it refused by the rate limit", err)
	}
	// No model: the agent cannot start, and says why.
	if _, err := run.NewAgent(); err == nil || !strings.Contains(err.Error(), "no model") {
		t.Fatalf("NewAgent without a model: %v", err)
	}
}

// TestStartRunInASessionHeld: a session another process holds refuses a
// second run at once as Busy (exit 75, 409 session_busy), and records no
// turn for it.
func TestStartRunInASessionHeld(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "codeagent.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	sess, err := st.CreateSession(ctx, "s", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	rs := &Runs{Store: st, Checkers: &Checkers{}}
	first, err := rs.StartRun(ctx, RunRequest{Task: "one", Session: &sess, Sandbox: okSandbox{}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := first.Begin(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = rs.StartRun(ctx, RunRequest{Task: "two", Session: &sess, Sandbox: okSandbox{}})
	if d := Describe(err); d == nil || d.Class != Busy || d.Code != "session_busy" {
		t.Fatalf("a second run in a held session: %v (%+v), want Busy session_busy", err, d)
	}
	res := &agent.Result{Success: true}
	if err := first.Finish(res, nil, t.TempDir(), nil); err != nil {
		t.Fatal(err)
	}
	turns, err := st.Turns(ctx, sess.ID)
	if err != nil || len(turns) != 1 || turns[0].Task != "one" || turns[0].Status != store.TurnSucceeded {
		t.Fatalf("turns = %+v, %v; want the first run's only", turns, err)
	}
}
