package app

import (
	"context"
	"errors"
	"log/slog"

	"github.com/codeagent/codeagent/agent"
	"github.com/codeagent/codeagent/kernel"
	"github.com/codeagent/codeagent/llm"
	"github.com/codeagent/codeagent/llm/providers"
	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/session"
	"github.com/codeagent/codeagent/store"
)

// Runs are what a process shares among the agent runs its doors start
// (`codeagent run`, the HTTP API's runs, MCP's run_task): the audit store,
// the model, the checkers and the secrets to redact. StartRun is the one
// assembly of a run: its session's lease and turn (package session), its
// sandbox under the rate limit and the audit log, its provider, checker,
// agent and kernel.
type Runs struct {
	// Store keeps the audit log and the sessions' turns; nil records
	// nothing (a library's MCP server without a data directory).
	Store *store.Store
	// Model configures each run's provider; nil refuses runs (ModelError
	// says why).
	Model      *llm.Config
	ModelError string
	// Checkers are the static checkers of runs with and without a network.
	Checkers *Checkers
	// Secrets are redacted from everything the model sees or a run shows,
	// besides the model's API key.
	Secrets []string
	Logger  *slog.Logger
}

// RunRequest is one agent run as a door asks for it.
type RunRequest struct {
	// Config is the agent's configuration; agent.New validates it (an
	// error of class Invalid). Its Secrets are added to Runs.Secrets.
	Config agent.Config
	// Task is the task in plain language, as the turn records it.
	Task string
	// TestCode are the caller's tests, when it gave any: Agent gives them
	// to a task that has none of its own (see agent.Task.TestCode).
	TestCode string
	// Session is the session the run is a turn of (its lease is taken,
	// its earlier turns summarised for the model, the turn recorded); nil
	// runs outside any, audited under Label.
	Session *store.Session
	Label   string
	// Purpose names the holder in lease messages ("codeagent run"); Wait
	// and OnWait wait for a session another process holds.
	Purpose string
	Wait    bool
	OnWait  func(*store.LeaseHeldError)
	// Sandbox runs the programs (the door's, under its queue); PerMinute
	// bounds the run's executions in the session (or the run) unless Limit
	// gives the door session's limit (an MCP session's) to count them in.
	Sandbox   sandbox.Sandbox
	PerMinute int
	Limit     *SessionLimit
	// Audit, when Kind is set, is the request's own record (MCP's
	// run_task), written before anything runs: what cannot be recorded
	// does not run.
	Audit AuditRecord
	// Observer sees the run's events besides the audit log.
	Observer agent.Observer
	// Installer, when set, installs what the run's programs declare (and
	// what the door declared up front); Sandbox must be its Sandbox.
	Installer *Installer
	// Kernel, when set, is the kernel that tool mode's cells run in: one
	// that outlives the run (a server's or an MCP session's). Nil starts
	// the run's own, ended with it.
	Kernel *KeptKernel
	// Approver is asked before executions as Config.Approve says (the
	// door's: a terminal, the API's approvals, MCP elicitation).
	Approver agent.Approver
	// Review, when set, configures the reviewer model (Config.ReviewModel
	// names its model); its API key is the door's to give, never a
	// request's.
	Review *llm.Config
	// MayGrantHost refuses hosts beyond the door's ceiling, which no
	// approval passes (nil: none, the command line's).
	MayGrantHost func(rule string) error
	// GrantBase is where a network a person grants to a run that has none
	// starts from: the door's byte budget and name overrides.
	GrantBase *sandbox.Network
}

// AuditRecord is one audit record: its kind and fields.
type AuditRecord struct {
	Kind string
	Data map[string]any
}

// KeptKernel is a kernel kept by a session rather than a run: Exec runs a
// cell in it, Restart restarts it.
type KeptKernel struct {
	Exec    func(context.Context, kernel.Cell) (kernel.Result, error)
	Restart func()
}

// Run is one agent run under way. After StartRun: Begin (records the
// turn), then Agent (builds and runs the agent), then Finish; Close
// instead of Begin ends a run that does not go ahead.
type Run struct {
	ID  string
	Rec *session.Recorder

	runs  *Runs
	req   RunRequest
	sr    *session.Run
	meter llm.Meter
	log   *slog.Logger
}

// StartRun takes the request's session (see session.Start) and writes the
// request's audit record; nothing has run yet.
func (rs *Runs) StartRun(ctx context.Context, req RunRequest) (*Run, error) {
	log := rs.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	o := session.Options{Store: rs.Store, Session: req.Session, Label: req.Label,
		Task: req.Task, Purpose: req.Purpose, Wait: req.Wait, OnWait: req.OnWait,
		Sandbox: req.Sandbox, PerMinute: req.PerMinute, Logger: log}
	if l := req.Limit; l != nil {
		o.PerMinute, o.Bucket = l.perMinute, l.bucket
	}
	sr, err := session.Start(ctx, o)
	if err != nil {
		return nil, err
	}
	if req.Audit.Kind != "" {
		if err := sr.Rec.Audit(req.Audit.Kind, req.Audit.Data); err != nil {
			sr.Close()
			return nil, &session.AuditError{Err: err}
		}
	}
	return &Run{ID: sr.ID, Rec: sr.Rec, runs: rs, req: req, sr: sr, log: log}, nil
}

// AuditErr is the first audit record of the run that could not be
// written, as a *session.AuditError, or nil: a run with one did not
// succeed, whatever its result says.
func (r *Run) AuditErr() error {
	if err := r.Rec.Err(); err != nil {
		return &session.AuditError{Err: err}
	}
	return nil
}

// Begin records the run's turn and returns the context the run must use:
// it ends when StartRun's does or when the session's lease is lost.
func (r *Run) Begin(ctx context.Context) (context.Context, error) { return r.sr.Begin(ctx) }

// Close ends a run that did not begin: it releases the session.
func (r *Run) Close() { r.sr.Close() }

// History is the session's earlier turns, summarised for the model.
func (r *Run) History() string { return r.sr.History }

// NewAgent builds the run's agent: its provider (with the run's meter),
// its checker (with or without a network) and its sandbox. An error means
// the agent cannot start: no model, or a configuration agent.New refuses
// (class Invalid).
func (r *Run) NewAgent() (*agent.Agent, error) {
	rs := r.runs
	if rs.Model == nil {
		msg := "no model is configured"
		if rs.ModelError != "" {
			msg += ": " + rs.ModelError
		}
		return nil, errors.New(msg)
	}
	provider, err := providers.New(*rs.Model, r.log, &r.meter)
	if err != nil {
		return nil, Errorf(Invalid, "model: %v", err)
	}
	checker, err := rs.Checkers.For(r.req.Config.Network)
	if err != nil {
		return nil, err
	}
	cfg := r.req.Config
	cfg.Secrets = append(append([]string{rs.Model.APIKey}, rs.Secrets...), cfg.Secrets...)
	var installer agent.Installer
	if r.req.Installer != nil {
		r.req.Installer.audit(r.sr.Rec)
		installer = r.req.Installer
	}
	var reviewer llm.Provider
	if r.req.Review != nil {
		if reviewer, err = providers.New(*r.req.Review, r.log, &r.meter); err != nil {
			return nil, Errorf(Invalid, "review model: %v", err)
		}
		if cfg.ReviewModel == "" {
			cfg.ReviewModel = r.req.Review.Model
		}
		cfg.Secrets = append(cfg.Secrets, r.req.Review.APIKey)
	}
	a, err := agent.New(cfg, agent.Deps{Provider: provider, Sandbox: r.sr.Sandbox, Checker: checker, Logger: r.log,
		Observer: agent.Observers(r.req.Observer, r.sr.Rec), Installer: installer,
		Approver: r.req.Approver, Reviewer: reviewer, MayGrantHost: r.req.MayGrantHost, GrantBase: r.req.GrantBase})
	if err != nil {
		return nil, Errorf(Invalid, "%v", err)
	}
	return a, nil
}

// Agent runs a (from NewAgent) on task in ctx (from Begin): task gives the
// workspace (its prompt and tests default to the request's); the
// session's history and the kernel (the session's, or the run's own) are
// the run's. It fills in the result's usage from the run's meter (which
// also counts retried requests).
func (r *Run) Agent(ctx context.Context, a *agent.Agent, task agent.Task) (*agent.Result, error) {
	if task.Prompt == "" {
		task.Prompt = r.req.Task
	}
	if task.TestCode == "" {
		task.TestCode = r.req.TestCode
	}
	task.History = r.sr.History
	task.NewKernel = r.sr.NewKernel
	if k := r.req.Kernel; k != nil {
		kept := session.KeptKernel(r.sr.Rec, k.Exec, k.Restart)
		task.NewKernel = func(kernel.Options) kernel.Interpreter { return kept }
	}
	res, err := a.Run(ctx, task)
	r.Usage(res)
	return res, err
}

// Do builds the run's agent (NewAgent) and runs it on task (Agent), for a
// door that has nothing to check in between. A nil result means the agent
// never started.
func (r *Run) Do(ctx context.Context, task agent.Task) (*agent.Result, error) {
	a, err := r.NewAgent()
	if err != nil {
		return nil, err
	}
	return r.Agent(ctx, a, task)
}

// Usage fills in res's usage from the run's meter.
func (r *Run) Usage(res *agent.Result) {
	if res == nil {
		return
	}
	if n := r.meter.Requests(); n > 0 {
		u := r.meter.Total()
		res.Usage = agent.Usage{Requests: n, InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, TotalTokens: u.Total()}
	}
}

// Finish records the run's end (see session.Run.Finish): res may be nil
// when the agent never started; dir is the workspace the artifacts are
// in; events, when given, are kept with the turn.
func (r *Run) Finish(res *agent.Result, runErr error, dir string, events []agent.Event) error {
	return r.sr.Finish(res, runErr, dir, events)
}

// Observers is one agent.Observer telling each of obs (nil ones skipped):
// a door adds its own (the event stream) to a run's recorder.
func Observers(obs ...agent.Observer) agent.Observer { return agent.Observers(obs...) }
