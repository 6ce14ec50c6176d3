package mcpserver

import (
	"context"
	"fmt"
	"github.com/codeagent/codeagent/agent"
	"github.com/codeagent/codeagent/kernel"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/codeagent/codeagent/app"
	"github.com/codeagent/codeagent/safety"
	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/workspace"
)

// runTask is the run_task tool: the request checked and assembled
// (taskRequest), the run in the MCP session's workspace (taskRun), and its
// outcome (taskOutput).
func (s *Server) runTask(ctx context.Context, req *mcp.CallToolRequest, in RunTaskInput) (*mcp.CallToolResult, RunTaskOutput, error) {
	var out RunTaskOutput
	rr, err := s.taskRequest(req, in)
	if err != nil {
		return nil, out, err
	}
	if rr.Installer != nil {
		defer rr.Installer.Close()
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
	res, err := s.taskRun(ctx, req, st, ws, rr)
	if ctx.Err() != nil {
		return nil, out, fmt.Errorf("run_task: %w", context.Cause(ctx))
	}
	if err != nil {
		return nil, out, fmt.Errorf("run_task: %w", err)
	}
	return s.taskOutput(ws, res)
}

// taskRequest decodes run_task's input into the run it asks for, validated
// (app.RunRequest.Validate) and within this server's bounds, before
// anything runs: its language, files, limits, network, dependencies (an
// installer, which the caller closes) and approver. The MCP session's
// parts (its label, limit, kernel) are taskRun's.
func (s *Server) taskRequest(req *mcp.CallToolRequest, in RunTaskInput) (app.RunRequest, error) {
	if in.Language == "" {
		in.Language = s.langs[0]
	}
	l, err := s.language(in.Language)
	if err != nil {
		return app.RunRequest{}, err
	}
	if int64(len(in.Tests)) > s.cfg.MaxCode {
		return app.RunRequest{}, argError("tests are larger than %s", sandbox.FormatSize(s.cfg.MaxCode))
	}
	approve, err := approveMode(in.Approve)
	if err != nil {
		return app.RunRequest{}, err
	}
	network, err := s.network(in.AllowHosts)
	if err != nil {
		return app.RunRequest{}, err
	}
	rr := app.RunRequest{Task: in.Task, TestCode: in.Tests,
		Config: agent.Config{MaxIterations: in.MaxIterations, Verify: in.Verify == nil || *in.Verify, Lang: l.Name,
			Network: network, Mode: in.Mode, MaxSteps: in.MaxSteps, Approve: approve}}
	if err := rr.Validate(); err != nil {
		return rr, err
	}
	if approve != agent.ApproveOff {
		// Before anything runs: a client that cannot be asked gets an
		// error, never a run nobody approves.
		if rr.Approver, err = s.elicitApprover(req.Session); err != nil {
			return rr, err
		}
	}
	if err := s.checkFiles(in.Files); err != nil {
		return rr, err
	}
	if rr.Config.Limits, err = s.limits(l, nil); err != nil {
		return rr, err
	}
	if rr.Config.MaxIterations == 0 {
		rr.Config.MaxIterations = s.cfg.MaxIterations
	}
	if rr.Installer, err = s.taskInstaller(in, l.Name); err != nil {
		return rr, err
	}
	rr.Sandbox = s.deps.Sandbox
	if rr.Installer != nil {
		rr.Sandbox = rr.Installer.Sandbox(rr.Sandbox)
		rr.Config.Mode = agent.ModeProgram
	}
	// Audited first: what cannot be recorded does not run.
	rr.Audit = app.AuditRecord{Kind: "run_task", Data: map[string]any{"task": in.Task, "language": l.Name,
		"files": keys(in.Files), "max_iterations": rr.Config.MaxIterations, "tests": in.Tests != "", "allow_hosts": in.AllowHosts,
		"approve": approve}}
	// What a person may grant a program stays within this server's
	// egress ceiling, with its byte budget.
	rr.MayGrantHost, rr.GrantBase = s.networkBounds().MayGrantHost, s.networkBounds().GrantBase()
	return rr, nil
}

// taskRun runs rr in the MCP session st's workspace ws: its label and rate
// limit, progress notifications when the client asked for them, and tool
// mode's cells in the session's kernel.
func (s *Server) taskRun(ctx context.Context, req *mcp.CallToolRequest, st *sessionState, ws *workspace.Workspace, rr app.RunRequest) (*agent.Result, error) {
	rr.Label, rr.Limit = st.label, st.limit
	if token := req.Params.GetProgressToken(); token != nil {
		rr.Observer = &progress{ctx: ctx, ss: req.Session, token: token}
	}
	if km := s.deps.Kernels; km != nil {
		// Tool mode's cells run in the MCP session's kernel, as
		// execute_code's keep_state does; it stays the session's.
		key := kernelKey(st)
		rr.Kernel = &app.KeptKernel{Exec: func(ctx context.Context, c kernel.Cell) (kernel.Result, error) {
			return km.Exec(ctx, "mcp", false, key, ws.Dir, c)
		}, Restart: func() { km.Restart(key) }}
	}
	run, err := s.runs.StartRun(ctx, rr)
	if err != nil {
		return nil, err
	}
	a, err := run.NewAgent()
	if err != nil {
		run.Close()
		return nil, err
	}
	rctx, err := run.Begin(ctx)
	if err != nil {
		run.Close()
		return nil, err
	}
	var res *agent.Result
	if rr.Installer != nil {
		err = rr.Installer.Start(rctx)
	}
	if err == nil {
		res, err = run.Agent(rctx, a, agent.Task{Workspace: ws})
	}
	if ferr := run.Finish(res, err, ws.Dir, nil); ferr != nil && err == nil {
		err = ferr
	}
	return res, err
}

// taskOutput is run_task's result of res: the outcome as JSON, with the
// artifacts that are images as image content.
func (s *Server) taskOutput(ws *workspace.Workspace, res *agent.Result) (*mcp.CallToolResult, RunTaskOutput, error) {
	out := RunTaskOutput{Success: res.Success, Attempts: res.Attempts, Code: res.Code, Output: res.Output,
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

func (p *progress) Event(e agent.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n++
	_ = p.ss.NotifyProgress(p.ctx, &mcp.ProgressNotificationParams{ProgressToken: p.token, Progress: float64(p.n),
		Message: describe(e), Meta: mcp.Meta{"codeagent/event": string(e.Type), "codeagent/attempt": e.Attempt}})
}

// describe is a one-line account of an agent event for people.
func describe(e agent.Event) string {
	at := fmt.Sprintf("attempt %d/%d", e.Attempt, e.MaxAttempts)
	switch e.Phase {
	case agent.PhaseTests:
		at += " (tests)"
	case agent.PhaseTool:
		at = fmt.Sprintf("round %d/%d", e.Attempt, e.MaxAttempts)
		if e.Step > 0 {
			at += fmt.Sprintf(", step %d/%d %s", e.Step, e.MaxSteps, e.Tool)
		}
	}
	switch e.Type {
	case agent.EventAttemptStart:
		if e.FreshStart {
			return at + ": generating afresh from the task"
		}
		return at + ": generating"
	case agent.EventGenerated:
		if e.Phase == agent.PhaseTool {
			return at + ": the model answered"
		}
		if e.Code == "" {
			return at + ": the model gave no code"
		}
		return fmt.Sprintf("%s: generated %d lines", at, strings.Count(e.Code, "\n")+1)
	case agent.EventChecked:
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
	case agent.EventExecuted:
		if e.Result != nil {
			return fmt.Sprintf("%s: executed, %s (exit %d) in %d ms", at, e.Result.Status, e.Result.ExitCode, e.Result.WallMS)
		}
		return at + ": executed"
	case agent.EventVerified:
		if e.Verdict != nil && e.Verdict.TaskComplete {
			return at + ": verified, task complete"
		}
		return at + ": verified, not complete yet"
	case agent.EventToolCall:
		return at + ": called"
	case agent.EventToolResult:
		if e.ErrorClass != "" {
			return fmt.Sprintf("%s: failed (%s)", at, e.ErrorClass)
		}
		return at + ": done"
	case agent.EventReplayed:
		if e.ErrorClass != "" {
			return fmt.Sprintf("%s: the replay did not reproduce (%s)", at, e.ErrorClass)
		}
		return at + ": replayed in a fresh sandbox, reproduced"
	case agent.EventAccepted:
		return at + ": accepted"
	case agent.EventApprovalRequired:
		return at + ": waiting for the client's approval"
	case agent.EventApproval:
		if d := e.Decision; d != nil {
			return fmt.Sprintf("%s: %s by %s", at, d.Decision, d.By)
		}
		return at + ": decided"
	case agent.EventDone:
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
	if in.Mode == agent.ModeTools {
		return nil, argError("dependencies: mode tools runs in the session's kernel, which has none: use mode program (or auto)")
	}
	r, err := s.dependencies(ExecuteInput{Dependencies: in.Dependencies}, language)
	if err != nil {
		return nil, err
	}
	return app.NewInstaller(s.deps.Envs, r, nil), nil
}
