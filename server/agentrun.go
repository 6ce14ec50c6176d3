package server

import (
	"context"
	"errors"
	"time"

	"github.com/codeagent/codeagent/agent"
	"github.com/codeagent/codeagent/llm"
	"github.com/codeagent/codeagent/llm/providers"
	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/sandbox/ratelimit"
	"github.com/codeagent/codeagent/session"
	"github.com/codeagent/codeagent/store"
	"github.com/codeagent/codeagent/workspace"
)

// startRun records a turn in the session and starts the agent on it in the
// background; the turn's ID is the run's.
func (s *Server) startRun(ctx context.Context, o store.OwnedSession, req runRequest) (*run, error) {
	st := s.deps.Store
	if err := s.runs.reserve(o.ID, 2*s.cfg.Workers); err != nil {
		return nil, err
	}
	fail := func(err error) (*run, error) {
		s.runs.unreserve(o.ID)
		return nil, err
	}
	// No run of this session is under way, so a turn marked running was
	// left by a process that died.
	if err := st.MarkInterrupted(ctx, o.ID); err != nil {
		return fail(err)
	}
	turns, err := st.Turns(ctx, o.ID)
	if err != nil {
		return fail(err)
	}
	turn, err := st.BeginTurn(ctx, o.ID, req.Task)
	if err != nil {
		return fail(err)
	}
	r := &run{ID: turn.ID, SessionID: o.ID, Owner: o.Owner, Task: req.Task, Started: time.Now().UTC(),
		done: make(chan struct{}), notify: make(chan struct{}), status: runRunning}
	runCtx, cancel := context.WithTimeout(s.ctx, s.cfg.RunTimeout)
	r.cancel = cancel
	s.runs.add(r)
	go s.execute(runCtx, r, o, turn, req, session.Summary(turns))
	return r, nil
}

// execute runs the agent and records the turn, as `codeagent run
// --session` does: attempts and audit records through session.Recorder.
func (s *Server) execute(ctx context.Context, r *run, o store.OwnedSession, turn store.Turn, req runRequest, history string) {
	defer s.runs.finish(r)
	defer r.cancel()
	st := s.deps.Store
	log := s.log.With("run", r.ID, "key", o.Owner)
	rec := session.NewRecorder(ctx, st, o.Name, turn.ID, turn.ID, log)
	obs := agent.Observers(r, rec)
	meter := &llm.Meter{}
	res, err := s.runAgent(ctx, r, o, req, history, obs, meter)
	if res == nil {
		// The agent never started: say why in a done event, as it would.
		res = &agent.Result{History: []agent.Attempt{}, Artifacts: []workspace.Artifact{}, Message: err.Error()}
		ok := false
		obs.Event(agent.Event{Type: agent.EventDone, Time: time.Now(), Success: &ok, Message: res.Message})
	}
	if n := meter.Requests(); n > 0 {
		u := meter.Total()
		res.Usage = agent.Usage{Requests: n, InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, TotalTokens: u.Total()}
	}
	turn.Status = store.TurnFailed
	status := runFailed
	switch {
	case res.Success:
		turn.Status, status = store.TurnSucceeded, runSucceeded
	case errors.Is(ctx.Err(), context.Canceled):
		status = runCanceled
	}
	turn.Code, turn.Output, turn.Attempts = res.Code, res.Output, res.Attempts
	turn.InputTokens, turn.OutputTokens = res.Usage.InputTokens, res.Usage.OutputTokens
	turn.ModelTime, turn.SandboxTime = rec.Totals()
	turn.Artifacts = session.ArtifactRecords(s.workspaceDir(o.Owner, o.ID), res.Artifacts)
	if ferr := st.FinishTurn(context.WithoutCancel(ctx), turn); ferr != nil {
		log.Warn("record turn", "err", ferr)
	}
	s.metrics.run(status, res.Usage.Requests, res.Usage.InputTokens, res.Usage.OutputTokens)
	msg := ""
	if err != nil {
		msg = res.Message
	}
	log.Info("run finished", "status", status, "attempts", res.Attempts)
	r.end(status, res, msg)
}

// runAgent builds the agent for one run and runs it. A nil result means
// the agent could not start (no model, bad configuration).
func (s *Server) runAgent(ctx context.Context, r *run, o store.OwnedSession, req runRequest, history string,
	obs agent.Observer, meter *llm.Meter) (*agent.Result, error) {
	if s.deps.Model == nil {
		msg := "no model is configured: start codeagent serve with --base-url and --model (or --provider and an API key)"
		if s.deps.ModelError != "" {
			msg += ": " + s.deps.ModelError
		}
		return nil, errors.New(msg)
	}
	provider, err := providers.New(*s.deps.Model, s.log, meter)
	if err != nil {
		return nil, err
	}
	limited := ratelimit.New(&queuedSandbox{s: s, source: "run"}, s.cfg.RunExecsPerMinute)
	if recent, err := s.deps.Store.CountAudit(ctx, o.Name, "executed", time.Now().Add(-time.Minute)); err == nil {
		limited.Spend(recent)
	}
	maxIter := req.MaxIterations
	if maxIter == 0 {
		maxIter = s.cfg.MaxIterations
	}
	secrets := append([]string{s.deps.Model.APIKey}, s.deps.Secrets...)
	for _, k := range s.cfg.Keys {
		secrets = append(secrets, k.Token)
	}
	checker, err := s.checkerFor(req.net)
	if err != nil {
		return nil, err
	}
	a, err := agent.New(agent.Config{MaxIterations: maxIter, Verify: req.Verify == nil || *req.Verify,
		Lang: req.Language, Secrets: secrets, Network: req.net},
		agent.Deps{Provider: provider, Sandbox: limited, Checker: checker, Logger: s.log, Observer: obs})
	if err != nil {
		return nil, err
	}
	ws, err := s.sessionWorkspace(o.Owner, o.ID)
	if err != nil {
		return nil, err
	}
	return a.Run(ctx, agent.Task{Prompt: req.Task, Workspace: ws, History: history})
}

// queuedSandbox runs executions through the server's queue and counts
// them in the metrics. Closing it does nothing: the server does not own
// the sandbox.
type queuedSandbox struct {
	s       *Server
	source  string // exec or run
	bounded bool   // refuse when the queue is full instead of waiting
}

func (q *queuedSandbox) Run(ctx context.Context, spec sandbox.Spec) (sandbox.Result, error) {
	release, err := q.s.queue.Acquire(ctx, q.bounded)
	if err != nil {
		var qf *QueueFullError
		if errors.As(err, &qf) {
			q.s.metrics.rejectedExec()
		}
		return sandbox.Result{}, err
	}
	defer release()
	res, err := q.s.deps.Sandbox.Run(ctx, spec)
	status := res.Status.String()
	if err != nil {
		status = sandbox.StatusSandboxError.String()
	}
	q.s.metrics.execution(q.source, status, res.WallTime)
	return res, err
}

func (q *queuedSandbox) Close() error { return nil }
