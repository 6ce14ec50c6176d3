package agent

import (
	"context"
	"strings"
	"testing"

	"github.com/codeagent/codeagent/llm/llmtest"
	"github.com/codeagent/codeagent/sandbox"
)

// An answer over the size cap and one that is not UTF-8 are bad answers:
// each attempt fails with a reason for the model, the next attempt
// replaces it, and a correctly encoded U+FFFD is ordinary text.
func TestBadAnswersAreReplaced(t *testing.T) {
	huge := llmtest.Reply{Text: strings.Repeat("x = 1\n", 1000), Repeat: 10000} // 60 MB, over the 1 MiB default
	broken := llmtest.Reply{Text: "```python\nprint('caf\xe9')\n```\n"}
	a, srv, ws, events := setup(t, Config{}, nil, huge, broken, py("print('caf\uFFFD')\n"))
	res, err := a.Run(context.Background(), Task{Prompt: "print café", Workspace: ws})
	if err != nil || !res.Success || res.Attempts != 3 {
		t.Fatalf("err %v, res %+v", err, res)
	}
	wantClasses(t, res.History, ClassBadAnswer, ClassBadAnswer, ClassNone)
	if !strings.Contains(res.Output, "caf\uFFFD") {
		t.Errorf("output = %q", res.Output)
	}
	reqs := srv.Requests()
	mustContain(t, "after the huge answer", sent(reqs[1]), "your answer was too long", "Write a short program", "4 attempts are left")
	mustContain(t, "after the broken answer", sent(reqs[2]), "not valid UTF-8")
	for i, r := range reqs {
		if len(r.Body) > 64<<10 {
			t.Errorf("request %d is %d bytes: the bad answer went back to the model", i+1, len(r.Body))
		}
	}
	var why []string
	for _, e := range *events {
		if e.Type == EventGenerated && e.ErrorClass == ClassBadAnswer {
			why = append(why, e.Message)
		}
	}
	if len(why) != 2 || !strings.Contains(why[0], "answer size limit of 1 MiB") || !strings.Contains(why[1], "not valid UTF-8") {
		t.Errorf("generated events say %q", why)
	}
}

// A verifier's answer that holds no verdict is asked again once; a second
// one counts as not complete, and the run's message says why.
func TestUnreadableVerdictIsAskedAgainThenNotComplete(t *testing.T) {
	p := llmtest.NewFake(fence("print('total 5')\n"), `{}`, `{}`,
		fence("print('total: 5')\n"), `I think so`, `{"task_complete": true, "missing": ""}`)
	sb := &fakeSandbox{fn: func(context.Context, sandbox.Spec, int) sandbox.Result { return okWith("total 5\n") }}
	a, ws := fakeAgent(t, Config{Verify: true}, p, sb, nil)
	res, err := a.Run(context.Background(), Task{Prompt: "print the total", Workspace: ws})
	if err != nil || !res.Success || res.Attempts != 2 {
		t.Fatalf("err %v, res %+v", err, res)
	}
	wantClasses(t, res.History, ClassIncomplete, ClassNone)
	v := res.History[0].Verdict
	if v == nil || v.TaskComplete || !strings.Contains(v.Missing, "could not be read") || !strings.Contains(v.Note, "`{}`") {
		t.Errorf("first verdict = %+v", v)
	}
	reqs := p.Requests()
	if len(reqs) != 6 {
		t.Fatalf("%d requests, want 6", len(reqs))
	}
	mustContain(t, "second verification", reqText(reqs[2]), "That was not the JSON object asked for")
	if len(reqs[2].Messages) != 3 || !reqs[2].JSON {
		t.Errorf("second verification: %d messages, JSON %v", len(reqs[2].Messages), reqs[2].JSON)
	}

	// With one attempt the run fails, and its message gives the reason.
	p = llmtest.NewFake(fence("print('total 5')\n"), `{}`, `{}`)
	a, ws = fakeAgent(t, Config{Verify: true, MaxIterations: 1}, p, sb, nil)
	res, err = a.Run(context.Background(), Task{Prompt: "print the total", Workspace: ws})
	if err != nil || res.Success || !strings.Contains(res.Message, "within 1 attempts; the last: attempt 1 (incomplete): ran, but the verifier's answer could not be read") {
		t.Fatalf("err %v, message %q", err, res.Message)
	}
}
