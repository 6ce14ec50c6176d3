package app

import (
	"context"
	"log/slog"
	"time"

	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/sandbox/ratelimit"
	"github.com/codeagent/codeagent/session"
	"github.com/codeagent/codeagent/store"
)

// ExecRequest is a door's request to run programs or cells outside an
// agent run (POST /v1/exec, a session's exec, MCP's execute_code), as
// StartExec records it.
type ExecRequest struct {
	// Store keeps the audit log; nil records nothing (a library's MCP
	// server without a data directory).
	Store *store.Store
	// Session names the records' session ("" for none); Audit is the
	// request's own record, written first.
	Session string
	Audit   AuditRecord
	// Sandbox is the door's (under the executions' queue).
	Sandbox sandbox.Sandbox
	// Limit, when set, is the rate limit of the door's session, waited
	// for at most MaxWait (default 30 s); the wait never shortens the
	// program's own time.
	Limit   *SessionLimit
	MaxWait time.Duration
	Logger  *slog.Logger
}

// SessionLimit is the rate limit of a door's session (an MCP session),
// shared by its calls and its runs: perMinute executions a minute, in
// this process.
type SessionLimit struct {
	perMinute int
	bucket    ratelimit.Bucket
}

// NewSessionLimit returns a limit of perMinute executions a minute
// (ratelimit.DefaultPerMinute when 0).
func NewSessionLimit(perMinute int) *SessionLimit {
	perMinute = ratelimit.PerMinute(perMinute)
	return &SessionLimit{perMinute: perMinute, bucket: ratelimit.NewMemoryBucket(perMinute)}
}

// Exec is a door's recorded request: each execution (Run) and kernel cell
// (Cell) it makes passes the rate limit, then the audit log, then the
// door's sandbox (the order of sandbox.Stack).
type Exec struct {
	ID  string
	Rec *session.Recorder
	req ExecRequest
	sb  sandbox.Sandbox
	lim *ratelimit.Limiter // its Wait alone: see limited
}

// StartExec writes the request's audit record: what cannot be recorded
// does not run (a *session.AuditError).
func StartExec(ctx context.Context, req ExecRequest) (*Exec, error) {
	if req.MaxWait <= 0 {
		req.MaxWait = 30 * time.Second
	}
	id := "exec-" + session.NewRunID()
	rec := session.NewRecorder(ctx, req.Store, req.Session, "", id, req.Logger)
	if req.Audit.Kind != "" {
		if err := rec.Audit(req.Audit.Kind, req.Audit.Data); err != nil {
			return nil, &session.AuditError{Err: err}
		}
	}
	x := &Exec{ID: id, Rec: rec, req: req}
	layers := sandbox.Layers{Audit: func(next sandbox.Sandbox) sandbox.Sandbox { return session.Audited(next, rec) }}
	if l := req.Limit; l != nil {
		x.lim = ratelimit.NewShared(unclosed{req.Sandbox}, l.perMinute, l.bucket)
		layers.RateLimit = func(next sandbox.Sandbox) sandbox.Sandbox { return limited{x: x, next: next} }
	}
	x.sb = sandbox.Stack(unclosed{req.Sandbox}, layers)
	return x, nil
}

// Run runs spec.
func (x *Exec) Run(ctx context.Context, spec sandbox.Spec) (sandbox.Result, error) {
	return x.sb.Run(ctx, spec)
}

// Cell runs a kernel's cell with run, recorded with its code and time
// limit. A cell is no sandbox's Run, so the order of sandbox.Stack is
// kept here by hand: the rate limit, then the record, then run (which
// takes the queue where the process has one: Kernels.Exec).
func (x *Exec) Cell(ctx context.Context, code string, timeout time.Duration, run func() (sandbox.Result, error)) (sandbox.Result, error) {
	if err := x.wait(ctx); err != nil {
		return sandbox.Result{}, err
	}
	return x.Rec.Cell(code, timeout, run)
}

// wait takes the rate limit's token, waiting at most MaxWait.
func (x *Exec) wait(ctx context.Context) error {
	if x.lim == nil {
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, x.req.MaxWait)
	defer cancel()
	return x.lim.Wait(wctx)
}

// limited is the rate limit layer of an Exec: it waits for the limit at
// most MaxWait (see wait), where a ratelimit.Limiter's Run would wait as
// long as the program's own context allows.
type limited struct {
	x    *Exec
	next sandbox.Sandbox
}

func (l limited) Run(ctx context.Context, spec sandbox.Spec) (sandbox.Result, error) {
	if err := l.x.wait(ctx); err != nil {
		return sandbox.Result{}, err
	}
	return l.next.Run(ctx, spec)
}

func (l limited) Close() error { return l.next.Close() }

// unclosed is a door's sandbox that the Exec does not close.
type unclosed struct{ sandbox.Sandbox }

func (unclosed) Close() error { return nil }

// WithRateWaitNotice returns ctx under which an execution that must wait
// for its session's rate limit first tells notice the wait and the limit
// (see ratelimit.WithWaitNotice): a door shows it instead of a stall.
func WithRateWaitNotice(ctx context.Context, notice func(wait time.Duration, perMinute int)) context.Context {
	return ratelimit.WithWaitNotice(ctx, notice)
}
