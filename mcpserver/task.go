package mcpserver

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/codeagent/codeagent/app"
	"github.com/codeagent/codeagent/safety"
	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/workspace"
)

func (s *Server) runTask(ctx context.Context, req *mcp.CallToolRequest, in RunTaskInput) (*mcp.CallToolResult, RunTaskOutput, error) {
	var out RunTaskOutput
	if in.Language == "" {
		in.Language = s.langs[0]
	}
	l, err := s.language(in.Language)
	if err != nil {
		return nil, out, err
	}
	switch {
	case strings.TrimSpace(in.Task) == "":
		return nil, out, argError("task is empty")
	case len(in.Task) > s.cfg.MaxTask:
		return nil, out, argError("task is longer than %d bytes", s.cfg.MaxTask)
	case in.MaxIterations < 0 || in.MaxIterations > app.MaxIterationsCeiling:
		return nil, out, argError("max_iterations %d: want 1 to %d", in.MaxIterations, app.MaxIterationsCeiling)
	case int64(len(in.Tests)) > s.cfg.MaxCode:
		return nil, out, argError("tests are larger than %s", sandbox.FormatSize(s.cfg.MaxCode))
	case in.Tests != "" && !app.HasTests(l.Name):
		return nil, out, argError("tests need %s, not %s", app.TestLanguages(), l.Name)
	case in.Mode != "" && in.Mode != app.ModeProgram && in.Mode != app.ModeTools && in.Mode != app.ModeAuto:
		return nil, out, argError("mode %q: want program, tools or auto", in.Mode)
	case in.MaxSteps < 0 || in.MaxSteps > 200:
		return nil, out, argError("max_steps %d: want 1 to 200", in.MaxSteps)
	case in.Mode == app.ModeTools && (in.Tests != "" || len(in.AllowHosts) > 0):
		return nil, out, argError("mode tools takes neither tests nor allow_hosts: use mode program (or auto)")
	}
	approve, err := approveMode(in.Approve)
	if err != nil {
		return nil, out, err
	}
	var approver app.Approver
	if approve != app.ApproveOff {
		// Before anything runs: a client that cannot be asked gets an
		// error, never a run nobody approves.
		if approver, err = s.elicitApprover(req.Session); err != nil {
			return nil, out, err
		}
	}
	if err := s.checkFiles(in.Files); err != nil {
		return nil, out, err
	}
	limits, err := s.limits(l, nil)
	if err != nil {
		return nil, out, err
	}
	network, err := s.network(in.AllowHosts)
	if err != nil {
		return nil, out, err
	}
	installer, err := s.taskInstaller(in, l.Name)
	if err != nil {
		return nil, out, err
	}
	sb := s.deps.Sandbox
	if installer != nil {
		defer installer.Close()
		sb = installer.Sandbox(sb)
		in.Mode = app.ModeProgram
	}
	maxIter := in.MaxIterations
	if maxIter == 0 {
		maxIter = s.cfg.MaxIterations
	}
	st, ctx, done, err := s.session(ctx, req)
	if err != nil {
		return nil, out, err
	}
	defer done()
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RunTimeout)
	defer cancel()
	ws, unlock, err := s.lockedWorkspace(ctx, st, in.Files)
	if err != nil {
		return nil, out, err
	}
	defer unlock()
	var obs app.Observer
	if token := req.Params.GetProgressToken(); token != nil {
		obs = &progress{ctx: ctx, ss: req.Session, token: token}
	}
	rr := app.RunRequest{
		Config: app.AgentConfig{MaxIterations: maxIter, Verify: in.Verify == nil || *in.Verify, Lang: l.Name,
			Limits: limits, Network: network, Mode: in.Mode, MaxSteps: in.MaxSteps, Approve: approve},
		Task:  in.Task,
		Label: st.label, Sandbox: sb, Limit: st.limit, Installer: installer,
		// Audited first: what cannot be recorded does not run.
		Audit: app.AuditRecord{Kind: "run_task", Data: map[string]any{"task": in.Task, "language": l.Name,
			"files": keys(in.Files), "max_iterations": maxIter, "tests": in.Tests != "", "allow_hosts": in.AllowHosts, "approve": approve}},
		Observer: obs, Approver: approver,
		// What a person may grant a program stays within this server's
		// egress ceiling, with its byte budget.
		MayGrantHost: s.networkBounds().MayGrantHost, GrantBase: s.networkBounds().GrantBase(),
	}
	if km := s.deps.Kernels; km != nil {
		// Tool mode's cells run in the MCP session's kernel, as
		// execute_code's keep_state does; it stays the session's.
		key := kernelKey(st)
		rr.Kernel = &app.KeptKernel{Exec: func(ctx context.Context, c app.Cell) (app.CellResult, error) {
			return km.Exec(ctx, "mcp", false, key, ws.Dir, c)
		}, Restart: func() { km.Restart(key) }}
	}
	run, err := s.runs.StartRun(ctx, rr)
	if err != nil {
		return nil, out, err
	}
	a, err := run.NewAgent()
	if err != nil {
		run.Close()
		return nil, out, err
	}
	rctx, err := run.Begin(ctx)
	if err != nil {
		run.Close()
		return nil, out, err
	}
	var res *app.RunResult
	if installer != nil {
		err = installer.Start(rctx)
	}
	if err == nil {
		res, err = run.Agent(rctx, a, app.Task{Workspace: ws, TestCode: in.Tests})
	}
	if ferr := run.Finish(res, err, ws.Dir, nil); ferr != nil && err == nil {
		err = ferr
	}
	if ctx.Err() != nil {
		return nil, out, fmt.Errorf("run_task: %w", context.Cause(ctx))
	}
	if err != nil {
		return nil, out, fmt.Errorf("run_task: %w", err)
	}
	out = RunTaskOutput{Success: res.Success, Attempts: res.Attempts, Code: res.Code, Output: res.Output,
		Artifacts: res.Artifacts, Message: res.Message, Stopped: res.Stopped, Requests: res.Usage.Requests, Tokens: res.Usage.TotalTokens}
	if out.Artifacts == nil {
		out.Artifacts = []workspace.Artifact{}
	}
	images, names := s.images(ws, out.Artifacts)
	out.Images = names
	result, err := resultWith(out, images)
	return result, out, err
}

// progress sends one progress notification per agent event.
type progress struct {
	ctx   context.Context
	ss    *mcp.ServerSession
	token any
	mu    sync.Mutex
	n     int
}

func (p *progress) Event(e app.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n++
	_ = p.ss.NotifyProgress(p.ctx, &mcp.ProgressNotificationParams{ProgressToken: p.token, Progress: float64(p.n),
		Message: describe(e), Meta: mcp.Meta{"codeagent/event": string(e.Type), "codeagent/attempt": e.Attempt}})
}

// describe is a one-line account of an agent event for people.
func describe(e app.Event) string {
	at := fmt.Sprintf("attempt %d/%d", e.Attempt, e.MaxAttempts)
	switch e.Phase {
	case app.PhaseTests:
		at += " (tests)"
	case app.PhaseTool:
		at = fmt.Sprintf("round %d/%d", e.Attempt, e.MaxAttempts)
		if e.Step > 0 {
			at += fmt.Sprintf(", step %d/%d %s", e.Step, e.MaxSteps, e.Tool)
		}
	}
	switch e.Type {
	case app.EventAttemptStart:
		if e.FreshStart {
			return at + ": generating afresh from the task"
		}
		return at + ": generating"
	case app.EventGenerated:
		if e.Phase == app.PhaseTool {
			return at + ": the model answered"
		}
		if e.Code == "" {
			return at + ": the model gave no code"
		}
		return fmt.Sprintf("%s: generated %d lines", at, strings.Count(e.Code, "\n")+1)
	case app.EventChecked:
		warnings := 0
		for _, f := range e.Findings {
			if f.Kind == safety.KindLint {
				warnings++
			}
		}
		switch {
		case e.Safe != nil && *e.Safe && warnings == 0:
			return at + ": checked, no findings"
		case e.Safe != nil && *e.Safe:
			return fmt.Sprintf("%s: checked, passed with %d warning(s)", at, warnings)
		}
		return fmt.Sprintf("%s: checked, %d finding(s)", at, len(e.Findings)-warnings)
	case app.EventExecuted:
		if e.Result != nil {
			return fmt.Sprintf("%s: executed, %s (exit %d) in %d ms", at, e.Result.Status, e.Result.ExitCode, e.Result.WallMS)
		}
		return at + ": executed"
	case app.EventVerified:
		if e.Verdict != nil && e.Verdict.TaskComplete {
			return at + ": verified, task complete"
		}
		return at + ": verified, not complete yet"
	case app.EventToolCall:
		return at + ": called"
	case app.EventToolResult:
		if e.ErrorClass != "" {
			return fmt.Sprintf("%s: failed (%s)", at, e.ErrorClass)
		}
		return at + ": done"
	case app.EventReplayed:
		if e.ErrorClass != "" {
			return fmt.Sprintf("%s: the replay did not reproduce (%s)", at, e.ErrorClass)
		}
		return at + ": replayed in a fresh sandbox, reproduced"
	case app.EventAccepted:
		return at + ": accepted"
	case app.EventApprovalRequired:
		return at + ": waiting for the client's approval"
	case app.EventApproval:
		if d := e.Decision; d != nil {
			return fmt.Sprintf("%s: %s by %s", at, d.Decision, d.By)
		}
		return at + ": decided"
	case app.EventDone:
		if e.Success != nil && *e.Success {
			return "done: success"
		}
		return "done: " + e.Message
	}
	return at + ": " + string(e.Type)
}

// taskInstaller readies run_task's dependencies (program mode only), or
// returns nil when it asks for none.
func (s *Server) taskInstaller(in RunTaskInput, language string) (*app.Installer, error) {
	if in.Dependencies == nil || (len(in.Dependencies.Python) == 0 && len(in.Dependencies.JavaScript) == 0) {
		return nil, nil
	}
	if in.Mode == app.ModeTools {
		return nil, argError("dependencies: mode tools runs in the session's kernel, which has none: use mode program (or auto)")
	}
	r, err := s.dependencies(ExecuteInput{Dependencies: in.Dependencies}, language)
	if err != nil {
		return nil, err
	}
	return app.NewInstaller(s.deps.Envs, r, nil), nil
}
