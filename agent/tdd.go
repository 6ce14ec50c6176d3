package agent

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/codeagent/codeagent/llm"
	"github.com/codeagent/codeagent/llm/extract"
	"github.com/codeagent/codeagent/safety"
	"github.com/codeagent/codeagent/sandbox"
)

// ClassVacuousTests marks generated tests that passed against the stub.
const ClassVacuousTests ErrorClass = "vacuous_tests"

// Stub is the solution.py the generated tests run against before they are
// accepted. It is written by codeagent, not asked of the model: every name
// imported from it exists (PEP 562 module __getattr__) and every call
// raises NotImplementedError, so tests fail on it exactly when they
// exercise the solution, whatever names they use.
const Stub = `# Stub written by codeagent to check that the tests can fail:
# every name exists and every call raises NotImplementedError.
def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)

    def stub(*args, **kwargs):
        raise NotImplementedError(name)

    return stub
`

// makeTests asks the model for pytest tests of the task and accepts the
// first that fail against the stub. ok is false when no usable tests came
// within MaxTestRounds.
func (r *run) makeTests(ctx context.Context) (ok bool, err error) {
	max := r.a.cfg.MaxTestRounds
	d := r.taskData(1)
	msgs := []llm.Message{r.user(render("tests.txt", d))}
	for n := 1; n <= max; n++ {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		at := Attempt{N: n, Check: []safety.Finding{}}
		r.emit(Event{Type: EventAttemptStart, Attempt: n, MaxAttempts: max, Phase: PhaseTests})
		t0 := time.Now()
		answer, bad, err := r.chat(ctx, r.system, msgs, false)
		if err != nil {
			return false, err
		}
		var reason, output string
		accepted := false
		if bad != nil {
			at.ErrorClass = ClassBadAnswer
			r.emit(Event{Type: EventGenerated, Attempt: n, MaxAttempts: max, Phase: PhaseTests, ErrorClass: ClassBadAnswer, Message: bad.message, DurationMS: ms(t0)})
			msgs = append(msgs, bad.placeholder())
			reason = bad.forModel()
		} else {
			reason, output, accepted, err = r.tryTests(ctx, n, answer, &at, &msgs, t0)
		}
		r.res.TestRounds = append(r.res.TestRounds, at)
		if err != nil || accepted {
			return accepted, err
		}
		msgs = append(msgs, r.user(render("tests_rejected.txt", map[string]any{
			"Reason": reason, "Output": output, "TestFile": TestFileName, "Left": max - n,
		})))
	}
	return false, nil
}

// tryTests extracts, checks and runs one answer's tests against the stub.
// It returns why they were rejected, or accepted.
func (r *run) tryTests(ctx context.Context, n int, answer string, at *Attempt, msgs *[]llm.Message, t0 time.Time) (reason, output string, accepted bool, err error) {
	max := r.a.cfg.MaxTestRounds
	x, xerr := extract.Code(answer, "python")
	if xerr != nil {
		at.ErrorClass = ClassNoCode
		r.emit(Event{Type: EventGenerated, Attempt: n, MaxAttempts: max, Phase: PhaseTests, ErrorClass: ClassNoCode, DurationMS: ms(t0)})
		*msgs = append(*msgs, llm.Message{Role: llm.RoleAssistant, Content: r.a.redact.String(answer)})
		return "the answer held no ```python code block", "", false, nil
	}
	at.Code = r.a.redact.String(x.Code)
	*msgs = append(*msgs, llm.Message{Role: llm.RoleAssistant, Content: "```python\n" + at.Code + "```"})
	r.emit(Event{Type: EventGenerated, Attempt: n, MaxAttempts: max, Phase: PhaseTests, Code: at.Code, DurationMS: ms(t0)})

	t1 := time.Now()
	rep, err := r.a.deps.Checker.Check(ctx, safety.Python, []byte(x.Code))
	if err != nil {
		return "", "", false, err
	}
	at.Check = rep.Findings
	safe := rep.Safe()
	r.emit(Event{Type: EventChecked, Attempt: n, MaxAttempts: max, Phase: PhaseTests, Findings: rep.Findings, Safe: &safe,
		ErrorClass: ClassifyFindings(rep.Findings), DurationMS: ms(t1)})
	if !safe {
		at.ErrorClass = ClassifyFindings(rep.Findings)
		var b strings.Builder
		for _, f := range rep.Findings {
			fmt.Fprintf(&b, "line %d: %s [%s]; fix: %s\n", f.Line, f.Message, f.Rule, f.Hint)
		}
		return "the static checker rejected them", strings.TrimSuffix(b.String(), "\n"), false, nil
	}

	gv, err := r.gate(ctx, gate{n: n, phase: PhaseTests, lang: "python", code: x.Code})
	if err != nil {
		return "", "", false, err
	}
	if !gv.run {
		at.ErrorClass = gv.class
		return "they were not run: " + gv.why, "", false, nil
	}
	if gv.edited {
		x.Code = gv.code
		at.Code = r.a.redact.String(x.Code)
	}
	if err := r.ws.WriteFile(TestFileName, []byte(x.Code)); err != nil {
		return "", "", false, err
	}
	if err := r.ws.WriteFile(r.a.SolutionFile(), []byte(Stub)); err != nil {
		return "", "", false, err
	}
	res, class, err := r.exec(ctx, n, PhaseTests, true)
	if err != nil {
		return "", "", false, err
	}
	at.TestResult = resultJSON(res)
	out := r.clip(append(append([]byte(nil), res.Stdout...), res.Stderr...))
	switch {
	case res.Status == sandbox.StatusError && res.ExitCode == 1:
		r.tests, r.res.Tests = x.Code, at.Code
		return "", "", true, nil
	case res.Status == sandbox.StatusOK:
		at.ErrorClass = ClassVacuousTests
		return "they all pass against a stub solution whose every function raises NotImplementedError, so they test nothing; each test must call the solution and check its result", "", false, nil
	case res.Status == sandbox.StatusError && res.ExitCode == 5:
		at.ErrorClass = ClassVacuousTests
		return "pytest collected no tests (test functions must be named test_...)", out, false, nil
	default:
		at.ErrorClass = class
		return fmt.Sprintf("pytest could not run them (%s, exit status %d)", res.Status, res.ExitStatus()), out, false, nil
	}
}
