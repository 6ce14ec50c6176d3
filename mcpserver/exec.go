package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/codeagent/codeagent/agent"
	"math"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/codeagent/codeagent/app"
	"github.com/codeagent/codeagent/lang"
	"github.com/codeagent/codeagent/safety"
	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/workspace"
)

// maxRateWait is how long an execution may wait for its session's rate
// limit before it is refused.
const maxRateWait = 30 * time.Second

// language resolves name and refuses one the manifest does not list,
// naming the tool.
func (s *Server) language(name string) (lang.Language, error) {
	l, err := lang.Lookup(name)
	if err != nil {
		return l, argError("%v", err)
	}
	if m := s.deps.Manifest; m != nil {
		if _, err := m.ToolFor(l.Name); err != nil {
			return l, err
		}
	}
	return l, nil
}

// checkFiles validates the names and sizes of files to write.
func (s *Server) checkFiles(files map[string]string) error {
	if len(files) > s.cfg.MaxFiles {
		return argError("%d files: at most %d per call", len(files), s.cfg.MaxFiles)
	}
	if err := app.CheckFileNames(files); err != nil {
		return err
	}
	for name, data := range files {
		if int64(len(data)) > s.cfg.MaxFile {
			return argError("file %s is larger than %s", name, sandbox.FormatSize(s.cfg.MaxFile))
		}
	}
	return nil
}

// limits returns the limits of one execution of l: the manifest's tool
// limits (or the defaults) under what the call asks, which must stay within
// the server's caps and the manifest's values. The least a program can
// start with is the request's own rule (app.Program.Validate,
// app.CellRequest.Validate).
func (s *Server) limits(l lang.Language, req *Limits) (sandbox.Limits, error) {
	base, caps := sandbox.DefaultLimits(), s.cfg.MaxLimits
	if m := s.deps.Manifest; m != nil {
		tool, err := m.ToolFor(l.Name)
		if err != nil {
			return base, err
		}
		base, caps = tool.Limits(base), tool.Limits(caps)
	}
	if req == nil {
		return base, nil
	}
	t := req.TimeoutSeconds
	if math.IsNaN(t) || math.IsInf(t, 0) || t < 0 || req.MemoryMB < 0 || req.DiskMB < 0 || req.Processes < 0 {
		return base, argError("limits must be positive numbers")
	}
	if req.MemoryMB > 1<<20 || req.DiskMB > 1<<20 || t > 1e6 {
		return base, argError("limits are far over this server's maximum")
	}
	if c := req.CPUs; c != c || c < 0 || (c > 0 && c < 0.01) {
		return base, argError("limits.cpus must be a number of cores of at least 0.01")
	}
	if req.CPUs > caps.CPUs {
		return base, argError("limits.cpus is over this server's maximum of %g", caps.CPUs)
	}
	r := req.asked()
	over := []struct {
		name         string
		v, max, unit int64
	}{
		{"timeout_seconds", int64(r.WallTime), int64(caps.WallTime), int64(time.Second)},
		{"memory_mb", r.Memory, caps.Memory, 1 << 20},
		{"disk_mb", r.Disk, caps.Disk, 1 << 20},
		{"processes", int64(r.Processes), int64(caps.Processes), 1},
	}
	for _, o := range over {
		if o.v > o.max {
			return base, argError("limits.%s is over this server's maximum of %d", o.name, o.max/o.unit)
		}
	}
	return base.Overlay(r), nil
}

// asked are the limits a call set (zero fields: not set).
func (req *Limits) asked() sandbox.Limits {
	if req == nil {
		return sandbox.Limits{}
	}
	return sandbox.Limits{WallTime: time.Duration(req.TimeoutSeconds * float64(time.Second)), Memory: req.MemoryMB << 20,
		Disk: req.DiskMB << 20, Processes: req.Processes, CPUs: req.CPUs}
}

func (s *Server) executeCode(ctx context.Context, req *mcp.CallToolRequest, in ExecuteInput) (*mcp.CallToolResult, ExecuteOutput, error) {
	var out ExecuteOutput
	l, err := s.language(in.Language)
	if err != nil {
		return nil, out, err
	}
	switch {
	case int64(len(in.Code)) > s.cfg.MaxCode:
		return nil, out, argError("code is %d bytes, more than %s", len(in.Code), sandbox.FormatSize(s.cfg.MaxCode))
	case int64(len(in.Stdin)) > s.cfg.MaxFile:
		return nil, out, argError("stdin is larger than %s", sandbox.FormatSize(s.cfg.MaxFile))
	}
	if err := s.checkFiles(in.Files); err != nil {
		return nil, out, err
	}
	limits, err := s.limits(l, in.Limits)
	if err != nil {
		return nil, out, err
	}
	prog := app.Program{Lang: l, Code: []byte(in.Code), Limits: limits}
	if in.KeepState {
		err = s.checkCell(in)
	} else {
		err = prog.Validate()
	}
	if err != nil {
		return nil, out, err
	}
	network, err := s.network(in.AllowHosts)
	if err != nil {
		return nil, out, err
	}
	depReq, err := s.dependencies(in, l.Name)
	if err != nil {
		return nil, out, err
	}
	st, ctx, done, err := s.session(ctx, req)
	if err != nil {
		return nil, out, err
	}
	defer done()
	ws, unlock, err := s.lockedWorkspace(ctx, st, in.Files)
	if err != nil {
		return nil, out, err
	}
	defer unlock()
	before, err := ws.Snapshot(workspace.Limits{})
	if err != nil {
		return nil, out, err
	}
	// Audited first: what cannot be recorded does not run.
	x, err := s.startExec(ctx, st, app.AuditRecord{Kind: "execute_code", Data: map[string]any{"language": l.Name, "code": in.Code,
		"code_sha256": sha(in.Code), "files": keys(in.Files), "limits": limits, "allow_hosts": in.AllowHosts,
		"keep_state": in.KeepState}})
	if err != nil {
		return nil, out, err
	}
	if in.KeepState {
		return s.executeCell(ctx, st, ws, in, limits, before, x)
	}
	prog.Stdin, prog.Network, prog.Cache = strings.NewReader(in.Stdin), network, ws.KeepsCache()
	spec := prog.Spec(ws.Dir)
	if !depReq.Empty() {
		lease, err := app.EnsureDependencies(ctx, s.deps.Envs, depReq, x.Rec)
		if err != nil {
			return nil, out, argError("%v", app.Describe(err).Message)
		}
		defer lease.Release()
		lease.Apply(&spec)
	}
	res, err := x.Run(ctx, spec)
	var setup *sandbox.SetupError
	switch {
	case errors.As(err, &setup) || errors.Is(err, sandbox.ErrInvalidSpec):
		res = sandbox.Result{Status: sandbox.StatusSandboxError, Message: err.Error()}
	case err != nil:
		return nil, out, err
	}
	out.ResultJSON = res.JSON()
	if err := collect(x, ws, before, &out, res.WallTime); err != nil {
		return nil, out, err
	}
	images, names := s.images(ws, out.Files)
	out.Images = names
	result, err := resultWith(out, images)
	if err != nil {
		return nil, out, err
	}
	result.IsError = res.Status == sandbox.StatusSandboxError
	return result, out, nil
}

func (s *Server) checkCode(ctx context.Context, req *mcp.CallToolRequest, in CheckInput) (*mcp.CallToolResult, CheckOutput, error) {
	var out CheckOutput
	l, err := safety.ParseLanguage(in.Language)
	if err != nil {
		return nil, out, argError("%v", err)
	}
	if int64(len(in.Code)) > s.cfg.MaxCode {
		return nil, out, argError("code is %d bytes, more than %s", len(in.Code), sandbox.FormatSize(s.cfg.MaxCode))
	}
	st, ctx, done, err := s.session(ctx, req)
	if err != nil {
		return nil, out, err
	}
	defer done()
	rep, err := s.checker.Check(ctx, l, []byte(in.Code))
	if err != nil {
		return nil, out, err
	}
	out = CheckOutput{Language: string(rep.Language), Safe: rep.Safe(), Findings: rep.Findings, Lint: rep.Lint}
	if out.Findings == nil {
		out.Findings = []safety.Finding{}
	}
	if s.deps.Store != nil {
		safe := out.Safe
		x, _ := s.startExec(ctx, st, app.AuditRecord{}) // writes nothing yet
		x.Rec.Event(agent.Event{Type: agent.EventChecked,
			Time: time.Now(), Attempt: 1, MaxAttempts: 1, Phase: "check_code", Findings: out.Findings, Safe: &safe})
	}
	return nil, out, nil
}

// collect records an execution's result (with rec) and puts the
// workspace's changes since before in out.
func collect(x *app.Exec, ws *workspace.Workspace, before workspace.Snapshot, out *ExecuteOutput, wall time.Duration) error {
	if x != nil {
		x.Rec.Event(agent.Event{Type: agent.EventExecuted,
			Time: time.Now(), Attempt: 1, MaxAttempts: 1, Phase: "execute_code", Result: &out.ResultJSON, DurationMS: wall.Milliseconds()})
	}
	var err error
	out.Files, out.Skipped, err = ws.Changes(before, workspace.Limits{}, nil)
	if err != nil {
		return err
	}
	if out.Files == nil {
		out.Files = []workspace.Artifact{}
	}
	return nil
}

// resultWith is a tool result holding out as JSON text followed by images.
func resultWith(out any, images []mcp.Content) (*mcp.CallToolResult, error) {
	b, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("encode result: %w", err)
	}
	return &mcp.CallToolResult{Content: append([]mcp.Content{&mcp.TextContent{Text: string(b)}}, images...)}, nil
}
