package agent

import (
	"bytes"
	"context"
	"fmt"

	"github.com/codeagent/codeagent/lang"
	"github.com/codeagent/codeagent/sandbox"
)

// Cut is output that codeagent took out of what a run wrote before the
// rest is shown and recorded as the run's stdout and stderr: a block of
// its own, framed by markers that carry a secret of the run (see
// lang.TraceKey, newMarker). What is cut is never only the model's: the
// executed event, the attempt's history and the audit log keep it,
// redacted as all output is.
type Cut struct {
	// What it is: "trace" (the values a failing Python program's frames
	// held, given to the model) or "coverage" (a test run's coverage
	// report, read for Coverage).
	What string `json:"what"`
	// Stream it was cut from: "stdout" or "stderr".
	Stream string `json:"stream"`
	Text   string `json:"text"`
}

// exec runs the program (or, with tests, the language's test runner,
// without coverage) in the sandbox, redacts its output, classifies it and
// emits the executed event. A Python program runs traced unless
// Config.NoTrace, with a fresh key on its stdin: the values its failing
// frames held go to r.trace and r.cut, out of the stderr shown and
// classified.
func (r *run) exec(ctx context.Context, n int, phase string, tests bool) (sandbox.Result, ErrorClass, error) {
	if tests {
		res, class, _, err := r.execTests(ctx, n, phase, false, "")
		return res, class, err
	}
	path, traced := sandbox.WorkspacePath+"/"+r.a.SolutionFile(), !r.a.cfg.NoTrace && r.a.lang.Name == "python"
	spec := sandbox.Spec{Command: r.a.lang.Command(path), Workspace: r.ws.Dir, Limits: r.a.cfg.Limits, Network: r.network,
		Imports: r.imports}
	var key lang.TraceKey
	if traced {
		key = lang.NewTraceKey()
		spec.Command, spec.Stdin = r.a.lang.TracedCommand(path), bytes.NewReader(key.Stdin())
	}
	r.trace, r.cut = "", nil
	res, err := r.rawRun(ctx, spec, r.a.lang.Environ(r.ws.KeepsCache()))
	if err != nil {
		return res, "", err
	}
	if traced {
		var trace string
		res.Stderr, trace = key.Split(res.Stderr)
		if trace != "" {
			r.trace = r.a.redact.String(trace)
			r.cut = []Cut{{What: "trace", Stream: "stderr", Text: r.trace}}
		}
	}
	r.redactOutput(&res)
	class := Classify(res, string(res.Stderr))
	r.executed(n, phase, res, class, "")
	return res, class, nil
}

// execTests runs the tests, with cover (where the language measures it)
// under coverage of program in the same run, its report's marker fresh
// on the run's stdin: the report is taken out of the output, kept in
// r.cut, and returned read (nil when not measured).
func (r *run) execTests(ctx context.Context, n int, phase string, cover bool, program string) (sandbox.Result, ErrorClass, *Coverage, error) {
	tr := r.a.tests
	spec, marker := sandbox.Spec{Command: tr.Command, Workspace: r.ws.Dir, Limits: r.a.cfg.Limits, Network: r.network}, ""
	if cover && tr.Coverage != nil {
		marker = newMarker()
		spec.Command, spec.Stdin = tr.Coverage(r.a.SolutionFile()), bytes.NewReader([]byte(marker+"\n"))
	}
	r.cut = nil
	res, err := r.rawRun(ctx, spec, r.a.lang.Environ(r.ws.KeepsCache()))
	if err != nil {
		return res, "", nil, err
	}
	var cov *Coverage
	if marker != "" {
		var report string
		res.Stdout, report, cov = tr.ReadCoverage(res.Stdout, marker, program)
		if report != "" {
			r.cut = []Cut{{What: "coverage", Stream: "stdout", Text: r.a.redact.String(report)}}
		}
	}
	r.redactOutput(&res)
	class := classifyTests(tr, res)
	r.executed(n, phase, res, class, tr.Outcome(res).String())
	return res, class, cov, nil
}

// executed emits the executed event of a run (tests: what a test run
// showed, "" for a program), with what was cut from its output.
func (r *run) executed(n int, phase string, res sandbox.Result, class ErrorClass, tests string) {
	r.emit(Event{Type: EventExecuted, Attempt: n, Phase: phase, Result: resultJSON(res), Cut: r.cut, ErrorClass: class,
		Tests: tests, DurationMS: res.WallTime.Milliseconds()})
}

// sandboxRun runs spec with langEnv and the configured environment added,
// and returns the result with its output redacted.
func (r *run) sandboxRun(ctx context.Context, spec sandbox.Spec, langEnv map[string]string) (sandbox.Result, error) {
	res, err := r.rawRun(ctx, spec, langEnv)
	if err == nil {
		r.redactOutput(&res)
	}
	return res, err
}

// rawRun is sandboxRun without the redaction, for output that holds
// blocks of codeagent's own: they are cut first, then each part redacted
// apart, so that nothing the program writes (an unclosed private key
// block, say) runs over a block.
func (r *run) rawRun(ctx context.Context, spec sandbox.Spec, langEnv map[string]string) (sandbox.Result, error) {
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
	return res, nil
}

// redactOutput redacts res's stdout and stderr.
func (r *run) redactOutput(res *sandbox.Result) {
	res.Stdout, res.Stderr = r.a.redact.Bytes(res.Stdout), r.a.redact.Bytes(res.Stderr)
}

// classifyTests classes a run of the tests: the exception a failing test
// raised, or assertion when tests simply failed.
func classifyTests(tr *testRunner, res sandbox.Result) ErrorClass {
	c := Classify(res, string(res.Stdout)+"\n"+string(res.Stderr))
	if c == ClassRuntime && tr.Outcome(res) == testsFailed {
		return ClassAssertion
	}
	return c
}
