package server

import (
	"context"
	"errors"
	"time"

	"github.com/codeagent/codeagent/agent"
	"github.com/codeagent/codeagent/kernel"
	"github.com/codeagent/codeagent/llm"
	"github.com/codeagent/codeagent/llm/providers"
	"github.com/codeagent/codeagent/session"
	"github.com/codeagent/codeagent/store"
	"github.com/codeagent/codeagent/workspace"
)

// Causes of a run's cancellation, recorded with its turn.
var (
	errShuttingDown   = errors.New("the server is shutting down")
	errCanceledByUser = errors.New("canceled through the API")
)

// startRun takes the session's lease, records a turn and starts the agent
// on it in the background, as `codeagent run --session` does (see package
// session); the turn's ID is the run's.
func (s *Server) startRun(ctx context.Context, o store.OwnedSession, req runRequest) (*run, error) {
	if err := s.runs.reserve(o.ID, 2*s.cfg.Workers); err != nil {
		return nil, err
	}
	timed, stopTimer := context.WithTimeout(s.ctx, s.cfg.RunTimeout)
	runCtx, cancel := context.WithCancelCause(timed)
	fail := func(err error) (*run, error) {
		cancel(err)
		stopTimer()
		s.runs.unreserve(o.ID)
		return nil, err
	}
	sess := o.Session
	sr, err := session.Start(runCtx, session.Options{Store: s.deps.Store, Session: &sess, Task: req.Task, Purpose: "codeagent serve",
		Sandbox: s.executions.Sandbox("run", false), PerMinute: s.cfg.RunExecsPerMinute, Logger: s.log.With("key", o.Owner)})
	if err != nil {
		var held *store.LeaseHeldError
		if errors.As(err, &held) {
			return fail(conflict("the session is in use by another codeagent process (%s); wait for its run to end", held.Holder.Owner.Describe()))
		}
		return fail(err)
	}
	rctx, err := sr.Begin(ctx)
	if err != nil {
		sr.Close()
		return fail(err)
	}
	r := &run{ID: sr.ID, SessionID: o.ID, Owner: o.Owner, Task: req.Task, Started: time.Now().UTC(), ctx: rctx,
		done: make(chan struct{}), notify: make(chan struct{}), status: runRunning}
	r.cancel = func() { cancel(errCanceledByUser) }
	s.runs.add(r)
	go func() {
		defer stopTimer()
		s.execute(rctx, r, o, sr, req)
	}()
	return r, nil
}

// execute runs the agent and records the turn with its events.
func (s *Server) execute(ctx context.Context, r *run, o store.OwnedSession, sr *session.Run, req runRequest) {
	defer s.runs.finish(r)
	defer r.cancel()
	log := s.log.With("run", r.ID, "key", o.Owner)
	obs := agent.Observers(r, sr.Rec)
	meter := &llm.Meter{}
	res, err := s.runAgent(ctx, o, sr, req, obs, meter)
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
	status := runFailed
	msg := ""
	switch {
	case sr.Rec.Err() != nil:
		msg = (&session.AuditError{Err: sr.Rec.Err()}).Error()
		res.Success = false
	case res.Success:
		status = runSucceeded
	case ctx.Err() != nil:
		status, msg = runCanceled, "canceled: "+context.Cause(ctx).Error()
	case err != nil:
		msg = res.Message
	}
	if ferr := sr.Finish(res, err, s.workspaceDir(o.Owner, o.ID), r.eventList()); ferr != nil {
		log.Error("record the run's end", "err", ferr)
	}
	s.metrics.run(status, res.Usage.Requests, res.Usage.InputTokens, res.Usage.OutputTokens)
	log.Info("run finished", "status", status, "attempts", res.Attempts)
	s.runs.free(r)
	r.end(status, res, publicMessage(msg))
}

// runAgent builds the agent for one run and runs it. A nil result means
// the agent could not start (no model, bad configuration).
func (s *Server) runAgent(ctx context.Context, o store.OwnedSession, sr *session.Run, req runRequest,
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
		Lang: req.Language, Secrets: secrets, Network: req.net, Mode: req.Mode, MaxSteps: req.MaxSteps},
		agent.Deps{Provider: provider, Sandbox: sr.Sandbox, Checker: checker, Logger: s.log, Observer: obs})
	if err != nil {
		return nil, err
	}
	ws, err := s.sessionWorkspace(o.Owner, o.ID)
	if err != nil {
		return nil, err
	}
	// Cells run in the session's kernel (the one its cells API uses), each
	// waiting its turn in the execution queue; it stays the session's.
	key := kernelKey(o.Owner, o.ID)
	k := session.KeptKernel(sr.Rec, func(ctx context.Context, c kernel.Cell) (kernel.Result, error) {
		return s.execCell(ctx, key, ws.Dir, c, false)
	}, func() { s.kernels.Restart(key) })
	return a.Run(ctx, agent.Task{Prompt: req.Task, Workspace: ws, History: sr.History,
		NewKernel: func(kernel.Options) kernel.Interpreter { return k }})
}
