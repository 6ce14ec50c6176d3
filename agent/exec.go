package agent

import (
	"context"
	"fmt"

	"github.com/codeagent/codeagent/lang"
	"github.com/codeagent/codeagent/sandbox"
)

// pytestCommand runs the tests in the workspace.
var pytestCommand = []string{"python3", "-m", "pytest", "-q", "-p", "no:cacheprovider", "--tb=short", TestFileName}

// exec runs the program (or, with tests, pytest) in the sandbox, redacts
// its output, classifies it and emits the executed event. A Python
// program runs traced unless Config.NoTrace: the values its failing
// frames held go to r.trace, out of the stderr shown and classified.
func (r *run) exec(ctx context.Context, n int, phase string, tests bool) (sandbox.Result, ErrorClass, error) {
	path, traced := sandbox.WorkspacePath+"/"+r.a.SolutionFile(), !tests && !r.a.cfg.NoTrace && r.a.lang.Name == "python"
	cmd, imports := r.a.lang.Command(path), r.imports
	switch {
	case tests:
		cmd, imports = pytestCommand, nil
	case traced:
		cmd = r.a.lang.TracedCommand(path)
	}
	r.trace = ""
	res, err := r.sandboxRun(ctx, sandbox.Spec{Command: cmd, Workspace: r.ws.Dir, Limits: r.a.cfg.Limits, Network: r.network, Imports: imports}, r.a.lang.Env)
	if err != nil {
		return res, "", err
	}
	if traced {
		res.Stderr, r.trace = lang.SplitTrace(res.Stderr)
	}
	var class ErrorClass
	if tests {
		class = classifyTests(res)
	} else {
		class = Classify(res, string(res.Stderr))
	}
	r.emit(Event{Type: EventExecuted, Attempt: n, Phase: phase, Result: resultJSON(res), ErrorClass: class,
		DurationMS: res.WallTime.Milliseconds()})
	return res, class, nil
}

// sandboxRun runs spec with langEnv and the configured environment added,
// and returns the result with its output redacted.
func (r *run) sandboxRun(ctx context.Context, spec sandbox.Spec, langEnv map[string]string) (sandbox.Result, error) {
	env := make(map[string]string, len(langEnv)+len(r.a.cfg.Env)+len(spec.Env))
	for _, m := range []map[string]string{langEnv, r.a.cfg.Env, spec.Env} {
		for k, v := range m {
			env[k] = v
		}
	}
	spec.Env = env
	res, err := r.a.deps.Sandbox.Run(ctx, spec)
	if err != nil {
		return res, fmt.Errorf("run the program: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return res, err
	}
	res.Stdout, res.Stderr = r.a.redact.Bytes(res.Stdout), r.a.redact.Bytes(res.Stderr)
	return res, nil
}

// classifyTests classes a pytest run: the exception a failing test raised,
// or assertion when tests simply failed.
func classifyTests(res sandbox.Result) ErrorClass {
	c := Classify(res, string(res.Stdout)+"\n"+string(res.Stderr))
	if c == ClassRuntime && res.Status == sandbox.StatusError && res.ExitCode == 1 {
		return ClassAssertion
	}
	return c
}
