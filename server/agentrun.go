package server

import (
	"context"
	"errors"
	"github.com/codeagent/codeagent/agent"
	"github.com/codeagent/codeagent/kernel"
	"time"

	"github.com/codeagent/codeagent/app"
	"github.com/codeagent/codeagent/store"
	"github.com/codeagent/codeagent/workspace"
)

// Causes of a run's cancellation, recorded with its turn.
var (
	errShuttingDown   = errors.New("the server is shutting down")
	errCanceledByUser = errors.New("canceled through the API")
)

// startRun takes the session's lease, records a turn and starts the agent
// on it in the background (app.Runs, as `codeagent run --session` does);
// the turn's ID is the run's.
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
	r := &run{SessionID: o.ID, Owner: o.Owner, Task: req.Task, Started: time.Now().UTC(),
		done: make(chan struct{}), notify: make(chan struct{}), status: runRunning,
		approvals: newApprovals(s.cfg.ApprovalTimeout)}
	// The reviewer's endpoint and key are the server's; the request names
	// at most its model.
	review := app.ReviewFor(s.deps.Review, req.ReviewModel)
	reviewModel := ""
	if review != nil {
		reviewModel = review.Model
	}
	// Cells run in the session's kernel (the one its cells API uses), each
	// waiting its turn in the execution queue; it stays the session's. Its
	// workspace is the one execute opens before the agent starts.
	key := kernelKey(o.Owner, o.ID)
	var wsDir string
	sess := o.Session
	sb := s.executions.Sandbox("run", false)
	var installer *app.Installer
	if !req.deps.Empty() {
		// Installed when the run starts (execute): the request is
		// answered first.
		installer = app.NewInstaller(s.envs, req.deps, nil)
		sb = installer.Sandbox(sb)
	}
	rr := req.run
	if rr.Config.MaxIterations == 0 {
		rr.Config.MaxIterations = s.cfg.MaxIterations
	}
	rr.Config.ReviewModel = reviewModel
	rr.Session, rr.Purpose = &sess, "codeagent serve"
	rr.Sandbox, rr.PerMinute, rr.Installer = sb, s.cfg.RunExecsPerMinute, installer
	rr.Observer, rr.Approver, rr.Review = r, r.approvals, review
	rr.MayGrantHost, rr.GrantBase = s.networkBounds().MayGrantHost, s.networkBounds().GrantBase()
	rr.Kernel = &app.KeptKernel{Exec: func(ctx context.Context, c kernel.Cell) (kernel.Result, error) {
		return s.execCell(ctx, key, wsDir, c, false)
	}, Restart: func() { s.kernels.Restart(key) }}
	ar, err := s.agents.StartRun(runCtx, rr)
	if err != nil {
		return fail(err)
	}
	rctx, err := ar.Begin(ctx)
	if err != nil {
		ar.Close()
		return fail(err)
	}
	r.ID, r.ctx = ar.ID, rctx
	r.cancel = func() { cancel(errCanceledByUser) }
	s.runs.add(r)
	go func() {
		defer stopTimer()
		if installer != nil {
			defer installer.Close()
		}
		s.execute(rctx, r, o, ar, &wsDir, installer)
	}()
	return r, nil
}

// execute opens the session's workspace (into *wsDir, for the kernel's
// cells), runs the agent there and records the turn with its events.
func (s *Server) execute(ctx context.Context, r *run, o store.OwnedSession, ar *app.Run, wsDir *string, installer *app.Installer) {
	defer s.runs.finish(r)
	defer r.cancel()
	log := s.log.With("run", r.ID, "key", o.Owner)
	var res *agent.Result
	var err error
	if installer != nil {
		err = installer.Start(ctx)
	}
	var ws *workspace.Workspace
	if err == nil {
		ws, err = s.sessionWorkspace(o.Owner, o.ID)
	}
	if err == nil {
		*wsDir = ws.Dir
		res, err = ar.Do(ctx, agent.Task{Workspace: ws})
	}
	r.approvals.endAll()
	if res == nil {
		// The agent never started: say why in a done event, as it would.
		res = &agent.Result{History: []agent.Attempt{}, Artifacts: []workspace.Artifact{}, Message: err.Error()}
		ok := false
		app.Observers(r, ar.Rec).Event(agent.Event{Type: agent.EventDone, Time: time.Now(), Success: &ok, Message: res.Message})
		ar.Usage(res)
	}
	status := runFailed
	msg := ""
	switch {
	case ar.AuditErr() != nil:
		msg = ar.AuditErr().Error()
		res.Success = false
	case res.Success:
		status = runSucceeded
	case ctx.Err() != nil:
		status, msg = runCanceled, "canceled: "+context.Cause(ctx).Error()
	case err != nil:
		msg = res.Message
	}
	if ferr := ar.Finish(res, err, s.workspaceDir(o.Owner, o.ID), r.eventList()); ferr != nil {
		log.Error("record the run's end", "err", ferr)
	}
	s.metrics.run(status, res.Usage.Requests, res.Usage.InputTokens, res.Usage.OutputTokens)
	log.Info("run finished", "status", status, "attempts", res.Attempts)
	s.runs.free(r)
	r.end(status, res, publicMessage(msg))
}
