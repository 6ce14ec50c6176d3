package main

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path"
	"time"

	"github.com/codeagent/codeagent/agent"
	"github.com/codeagent/codeagent/app"
	"github.com/codeagent/codeagent/llm"
	"github.com/codeagent/codeagent/manifest"
	"github.com/codeagent/codeagent/safety"
	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/sandbox/backends"
	"github.com/codeagent/codeagent/session"
	"github.com/codeagent/codeagent/workspace"
)

// The steps of `codeagent run` (runRun): the request read and validated,
// the sandbox, the workspace, the agent and the files copied out.

// runSetup is what prepareRun read: the manifest and its policy, the
// network and the authorities it trusts, the model, and the run's request,
// validated, for runRun to complete.
type runSetup struct {
	m      *manifest.Manifest
	policy *safety.Policy
	trust  []byte
	model  llm.Config
	req    app.RunRequest
}

// prepareRun reads what the run asks for (the manifest, which may set its
// language, limits and attempts, the network, the tests and the model) and
// validates it (app.RunRequest.Validate) before anything is opened or run.
func prepareRun(o *runOptions) (*runSetup, error) {
	p := &runSetup{}
	var err error
	if p.m, p.policy, err = o.applyManifest(); err != nil {
		return nil, err
	}
	network, trust, err := o.Net.network(p.m)
	if err != nil {
		return nil, err
	}
	if network != nil {
		p.policy = p.policy.WithNetwork() // the proxy decides the hosts; HTTP clients may be used
	}
	p.trust = trust
	var testCode string
	if o.TestFile != "" {
		b, err := readSmallFile(o.TestFile, maxTestFile)
		if err != nil {
			return nil, usagef("--test-file: %w", err)
		}
		testCode = string(b)
	}
	p.req = app.RunRequest{Task: o.Task, TestCode: testCode, GrantBase: &sandbox.Network{CACerts: trust},
		Config: agent.Config{
			MaxIterations: o.MaxIterations, FreshStartAfter: o.FreshStartAfter, Verify: !o.NoVerify,
			Lang: o.Lang, Limits: o.Limits, Tests: o.Tests, Network: network,
			Mode: o.Mode, MaxSteps: o.MaxSteps, Tools: o.tools, Approve: o.Approval.Approve,
			NoTrace: o.NoTrace,
		}}
	if err := p.req.Validate(); err != nil {
		return nil, err
	}
	if p.model, err = o.Provider.resolve(o.Getenv); err != nil {
		return nil, err
	}
	return p, checkInputs(o.Files)
}

// runSandbox opens the run's backend: the flag's, or else the manifest's.
func runSandbox(o runOptions, m *manifest.Manifest, logger *slog.Logger) (sandbox.Sandbox, string, error) {
	backend := o.Backend
	if m != nil && m.Agent.Backend != "" && !o.setFlags["backend"] {
		backend = m.Agent.Backend
	}
	// A run executes several programs: keep sandboxes started ahead.
	sb, err := openBackend(backend, o.Backends.options(backends.Options{AllowWeakIsolation: o.AllowWeak, Warm: 2, WarmPython: 1, Logger: logger}))
	if errors.Is(err, backends.ErrUnknown) {
		return nil, "", usageError{err}
	}
	return sb, backend, err
}

// runWorkspace readies the run's workspace, in fin: the session's, the
// --workdir or a temporary one, seeded with the offered folder and the
// --file inputs.
func runWorkspace(o runOptions, s stdio, inSession bool, dataDir string) (*workspace.Workspace, *folderFinish, error) {
	var folder *workspace.Folder
	var err error
	if o.Folder != "" {
		if folder, err = offerFolder(o.Folder, os.TempDir(), s); err != nil {
			return nil, nil, usageError{err}
		}
	}
	var ws *workspace.Workspace
	if inSession {
		ws, err = openSessionWorkspace(dataDir, o.Session)
	} else {
		ws, err = workspace.New(o.Workdir)
	}
	if err == nil && folder != nil {
		if err = seedFolder(folder, ws, s); err != nil {
			ws.Close()
		}
	}
	if err != nil {
		return nil, nil, usageError{err}
	}
	fin := &folderFinish{f: folder, ws: ws, dataDir: dataDir}
	for _, f := range o.Files {
		if !inSession {
			_, err = ws.CopyIn(f, maxInputFile) // never over a file of the user's --workdir
		} else {
			err = updateSessionFile(ws, f, s)
		}
		if err != nil {
			return nil, fin, usageError{err}
		}
	}
	return ws, fin, nil
}

// agentRun builds the run's agent and runs it in ws, then records the
// run's end; a nil agent means it never started (run closed). A record
// of the audit log that could not be written fails the run.
func agentRun(ctx context.Context, run *app.Run, ws *workspace.Workspace, s stdio) (*agent.Result, *agent.Agent, error) {
	a, err := run.NewAgent()
	if err != nil {
		run.Close()
		return nil, nil, usageError{err}
	}
	rctx, err := run.Begin(ctx)
	if err != nil {
		run.Close()
		return nil, nil, err
	}
	// A wait for the session's rate limit is said, not a silent stall.
	rctx = app.WithRateWaitNotice(rctx, func(wait time.Duration, perMinute int) {
		printErr(s.err, "waiting %s: the session's rate limit of %d executions a minute", wait.Round(100*time.Millisecond), perMinute)
	})
	res, err := run.Agent(rctx, a, agent.Task{Workspace: ws})
	if ferr := run.Finish(res, err, ws.Dir, nil); ferr != nil {
		var ae *session.AuditError
		if errors.As(ferr, &ae) {
			res.Success, res.Message = false, ae.Error()
		}
		switch {
		case err == nil:
			err = ferr
		case !errors.As(err, &ae):
			err = errors.Join(err, ferr)
		}
	}
	return res, a, err
}

// copyRunOut copies the files the program wrote to --out (and the program
// and its tests when it succeeded), or says where they went when nobody
// will see them otherwise.
func copyRunOut(o runOptions, s stdio, a *agent.Agent, ws *workspace.Workspace, res *agent.Result, inFolder bool) {
	if o.Out != "" {
		// The program goes along only when it succeeded: after a rejected
		// attempt the file in the workspace is an older program.
		arts := res.Artifacts
		if res.Success {
			arts = append([]workspace.Artifact{{Path: a.SolutionFile(), Dest: path.Base(a.SolutionFile())}}, arts...)
			if o.TestFile != "" || o.Tests {
				arts = append(arts, workspace.Artifact{Path: a.TestFile(), Dest: path.Base(a.TestFile())})
			}
		}
		copyOut := ws.CopyOutNew
		if o.Force {
			copyOut = ws.CopyOut
		}
		if _, cerr := copyOut(arts, o.Out, 0); cerr != nil {
			printErr(s.err, "copying to %s: %v", o.Out, cerr)
			if errors.Is(cerr, workspace.ErrExists) {
				printErr(s.err, "--force replaces files already in %s", o.Out)
			}
		}
	}
	if o.Out == "" && !inFolder && ws.Temporary() && len(res.Artifacts) > 0 && !o.JSON {
		printErr(s.err, "the files the program wrote were in a temporary workspace, removed with it: --out DIR copies them out")
	}
}
