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

// makeTests asks the model for tests of the task (for the language's
// runner, see testRunners) and accepts the first that fail against the
// runner's stub. ok is false when no usable tests came
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
			"Reason": reason, "Output": output, "TestFile": r.a.TestFile(), "Fence": r.a.lang.Name, "Left": max - n,
		})))
	}
	return false, nil
}

// tryTests extracts, checks and runs one answer's tests against the stub.
// It returns why they were rejected, or accepted.
func (r *run) tryTests(ctx context.Context, n int, answer string, at *Attempt, msgs *[]llm.Message, t0 time.Time) (reason, output string, accepted bool, err error) {
	max, tr, fence := r.a.cfg.MaxTestRounds, r.a.tests, r.a.lang.Name
	x, xerr := extract.Code(answer, fence)
	if xerr != nil {
		at.ErrorClass = ClassNoCode
		r.emit(Event{Type: EventGenerated, Attempt: n, MaxAttempts: max, Phase: PhaseTests, ErrorClass: ClassNoCode, DurationMS: ms(t0)})
		*msgs = append(*msgs, llm.Message{Role: llm.RoleAssistant, Content: r.a.redact.String(answer)})
		return "the answer held no ```" + fence + " code block", "", false, nil
	}
	at.Code = r.a.redact.Code(x.Code)
	*msgs = append(*msgs, llm.Message{Role: llm.RoleAssistant, Content: "```" + fence + "\n" + at.Code + "```"})
	r.emit(Event{Type: EventGenerated, Attempt: n, MaxAttempts: max, Phase: PhaseTests, Code: at.Code, CodeSHA256: sha(x.Code), DurationMS: ms(t0)})

	t1 := time.Now()
	rep, err := r.a.deps.Checker.Check(ctx, r.a.safeLang, []byte(x.Code))
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

	gv, err := r.gate(ctx, gate{n: n, phase: PhaseTests, lang: r.a.lang.Name, code: x.Code})
	if err != nil {
		return "", "", false, err
	}
	if !gv.run {
		at.ErrorClass = gv.class
		return "they were not run: " + gv.why, "", false, nil
	}
	if gv.edited {
		x.Code = gv.code
		at.Code = r.a.redact.Code(x.Code)
	}
	if tr.HasTests != nil && !tr.HasTests(x.Code) {
		at.ErrorClass = ClassVacuousTests
		return tr.NoTests, "", false, nil
	}
	if err := r.ws.WriteFile(tr.File, []byte(x.Code)); err != nil {
		return "", "", false, err
	}
	if err := r.ws.WriteFile(r.a.SolutionFile(), []byte(tr.Stub)); err != nil {
		return "", "", false, err
	}
	res, class, err := r.exec(ctx, n, PhaseTests, true)
	if err != nil {
		return "", "", false, err
	}
	at.TestResult = resultJSON(res)
	out := r.clip(append(append([]byte(nil), res.Stdout...), res.Stderr...))
	switch tr.Outcome(res) {
	case testsFailed:
		r.tests, r.res.Tests = x.Code, at.Code
		return "", "", true, nil
	case testsPassed:
		at.ErrorClass = ClassVacuousTests
		return "they all pass against a stub solution " + tr.StubFails + ", so they test nothing; each test must call the solution and check its result", "", false, nil
	case testsNone:
		at.ErrorClass = ClassVacuousTests
		return tr.NoTests, out, false, nil
	default:
		at.ErrorClass = class
		return fmt.Sprintf("%s could not run them (%s, exit status %d)", tr.Tool, res.Status, res.ExitStatus()), out, false, nil
	}
}

// runTests runs the tests on the attempt's program, under coverage where
// the language measures it, and feeds failed tests back; pass reports
// that they passed. Coverage is reported, never a failure: it is
// self-reported (see Coverage).
func (r *run) runTests(ctx context.Context, n int, at *Attempt) (res sandbox.Result, pass bool, err error) {
	res, class, cov, err := r.execTests(ctx, n, PhaseCode, true, at.Code)
	if err != nil {
		return res, false, err
	}
	at.TestResult, at.Cut = resultJSON(res), append(at.Cut, r.cut...)
	if class != ClassNone {
		at.ErrorClass = class
		r.debug(n, class, at.Code, res, true)
		return res, false, nil
	}
	at.Coverage = cov
	if cov != nil && cov.Unavailable != "" {
		r.a.log.Warn("coverage not measured", "attempt", n, "why", cov.Unavailable)
	}
	return res, true, nil
}
