package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"

	"github.com/codeagent/codeagent/app"
	"github.com/codeagent/codeagent/lang"
	"github.com/codeagent/codeagent/llm"
	"github.com/codeagent/codeagent/manifest"
	"github.com/codeagent/codeagent/safety"
	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/store"
	"github.com/codeagent/codeagent/workspace"
)

// applyManifest layers the manifest (if any) under the flags: limits of the
// language's tool, max iterations, the safety policy, and provider and model
// under the environment. It refuses a language whose tool is not listed.
func (o *runOptions) applyManifest() (*manifest.Manifest, *safety.Policy, error) {
	limits := sandbox.DefaultLimits()
	if o.Manifest == "" {
		o.Lang = runLanguage(o.Lang, o.Task, o.TestFile, nil)
		o.Limits = limits.Overlay(o.Limits)
		return nil, nil, nil
	}
	m, err := manifest.Load(o.Manifest)
	if err != nil {
		return nil, nil, usageError{err}
	}
	o.Lang = runLanguage(o.Lang, o.Task, o.TestFile, m.ToolLanguages())
	tool, err := m.ToolFor(o.Lang)
	if err != nil {
		return nil, nil, usageError{err}
	}
	// Tool mode offers every execute tool listed, each with its limits
	// under the flags.
	o.tools = map[string]sandbox.Limits{}
	for _, t := range m.Agent.Tools {
		o.tools[t.Name] = t.Limits(limits).Overlay(o.Limits)
	}
	o.Limits = tool.Limits(limits).Overlay(o.Limits)
	if n := m.Agent.Limits.MaxIterations; n > 0 && !o.setFlags["max-iterations"] {
		o.MaxIterations = n
	}
	policy, err := app.ManifestPolicy(m)
	if err != nil {
		return nil, nil, usageError{err}
	}
	o.Getenv = manifestEnv(m, o.Getenv)
	return m, policy, nil
}

// manifestEnv is getenv with m's provider and model as the lowest layer:
// the environment (and the flags, which read it after) win.
func manifestEnv(m *manifest.Manifest, getenv func(string) string) func(string) string {
	return func(k string) string {
		if v := getenv(k); v != "" {
			return v
		}
		switch k {
		case llm.EnvProvider:
			return m.Agent.Provider
		case llm.EnvModel:
			return m.Agent.Model
		}
		return ""
	}
}

// ensureSession returns the named session, created if new, or nil when
// name is "".
func ensureSession(ctx context.Context, st *store.Store, dataDir, name string) (*store.Session, error) {
	if name == "" {
		return nil, nil
	}
	sess, err := st.SessionByName(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		sess, err = st.CreateSession(ctx, name, sessionWorkspace(dataDir, name))
		if err != nil { // another process may have created it meanwhile
			sess, err = st.SessionByName(ctx, name)
		}
	}
	if err != nil {
		return nil, err
	}
	return &sess, nil
}

// checkInputs refuses --file arguments that could not be copied in, before
// anything is recorded: CopyIn checks them again.
func checkInputs(files []string) error {
	seen := map[string]string{}
	for _, f := range files {
		if other, ok := seen[filepath.Base(f)]; ok {
			return usagef("--file %s and --file %s have the same name in the workspace", other, f)
		}
		seen[filepath.Base(f)] = f
		fi, err := os.Stat(f)
		switch {
		case err != nil:
			return usagef("--file: %w", err)
		case !fi.Mode().IsRegular():
			return usagef("--file %s is not a regular file", f)
		case fi.Size() > maxInputFile:
			return usagef("--file %s is larger than %s", f, sandbox.FormatSize(maxInputFile))
		}
	}
	return nil
}

// updateSessionFile puts --file f into a session's workspace: a copy from
// an earlier turn is replaced when f has changed, kept when it has not,
// and the user is told which.
func updateSessionFile(ws *workspace.Workspace, f string, s stdio) error {
	name, how, err := ws.UpdateIn(f, maxInputFile)
	switch {
	case err != nil:
		return err
	case how == workspace.Replaced:
		printErr(s.err, "--file %s: replaced the session's %s, which differed", f, name)
	case how == workspace.Unchanged:
		printErr(s.err, "--file %s: the session's %s is the same, kept", f, name)
	}
	return nil
}

// runLanguage is the language a run writes in: --lang (by any name or
// alias, canonical after), else that of the --test-file's extension (the
// program must be in the tests' language), else the one the task names
// (lang.FromTask), else the manifest's only tool language, else python.
func runLanguage(flag, task, testFile string, tools []string) string {
	if flag != "" {
		if l, err := lang.Lookup(flag); err == nil {
			return l.Name
		}
		return flag // agent.New refuses it with the list
	}
	if testFile != "" {
		if l, err := lang.Detect(testFile); err == nil {
			return l.Name
		}
	}
	if l, ok := lang.FromTask(task); ok {
		return l.Name
	}
	if len(tools) == 1 {
		return tools[0]
	}
	return "python"
}
