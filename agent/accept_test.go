package agent

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/codeagent/codeagent/llm/llmtest"
	"github.com/codeagent/codeagent/sandbox"
)

// A rejection by Task.Accept goes back to the model with the check's
// output (never the check itself); the next attempt is accepted and then
// verified. A rejected attempt never reaches the verifier.
func TestAcceptRejectionIsFedBack(t *testing.T) {
	p := llmtest.NewFake(fence("def add(a, b):\n    return a - b\n"), fence("def add(a, b):\n    return a + b\n"),
		`{"task_complete": true, "missing": ""}`)
	sb := &fakeSandbox{fn: func(context.Context, sandbox.Spec, int) sandbox.Result { return okWith("") }}
	var events []Event
	a, ws := fakeAgent(t, Config{MaxIterations: 3, Verify: true}, p, sb, ObserverFunc(func(e Event) { events = append(events, e) }))
	var seen []string
	accept := func(_ context.Context, code string) (Acceptance, error) {
		seen = append(seen, code)
		if strings.Contains(code, "a + b") {
			return Acceptance{Passed: true}, nil
		}
		return Acceptance{Output: "assert add(1, 2) == 3\nAssertionError: got -1"}, nil
	}
	res, err := a.Run(context.Background(), Task{Prompt: "write add(a, b)", Workspace: ws, Accept: accept})
	if err != nil || !res.Success || res.Attempts != 2 {
		t.Fatalf("err %v, res %+v", err, res)
	}
	wantClasses(t, res.History, ClassAssertion, ClassNone)
	if acc := res.History[0].Acceptance; acc == nil || acc.Passed || acc.Class != ClassAssertion || !strings.Contains(acc.Output, "got -1") {
		t.Errorf("attempt 1 acceptance %+v", acc)
	}
	if acc := res.History[1].Acceptance; acc == nil || !acc.Passed || res.History[1].Verdict == nil {
		t.Errorf("attempt 2 acceptance %+v, verdict %+v (the verifier runs after an acceptance)", acc, res.History[1].Verdict)
	}
	if len(seen) != 2 {
		t.Errorf("accept ran %d times", len(seen))
	}
	reqs := p.Requests()
	mustContain(t, "repair", reqText(reqs[1]), "acceptance tests failed (assertion)", "AssertionError: got -1", "1  def add(a, b):")
	n := 0
	for _, e := range events {
		if e.Type == EventAccepted {
			n++
		}
	}
	if n != 2 {
		t.Errorf("%d accepted events, want 2", n)
	}
}

// An error from Task.Accept ends the run.
func TestAcceptErrorEndsTheRun(t *testing.T) {
	p := llmtest.NewFake(fence("print(1)\n"))
	sb := &fakeSandbox{fn: func(context.Context, sandbox.Spec, int) sandbox.Result { return okWith("1\n") }}
	a, ws := fakeAgent(t, Config{MaxIterations: 3}, p, sb, nil)
	boom := errors.New("scoring sandbox gone")
	res, err := a.Run(context.Background(), Task{Prompt: "print 1", Workspace: ws,
		Accept: func(context.Context, string) (Acceptance, error) { return Acceptance{}, boom }})
	if !errors.Is(err, boom) || res.Success || res.Attempts != 1 {
		t.Fatalf("err %v, res %+v", err, res)
	}
}
