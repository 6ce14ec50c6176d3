package agent

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/codeagent/codeagent/lang"
	"github.com/codeagent/codeagent/llm/llmtest"
	"github.com/codeagent/codeagent/sandbox"
)

// TestTraceGoesToTheRepairRequest: a Python program runs traced; the
// trace it writes after its traceback leaves the stderr that is recorded
// and shown, and reaches the repair request, redacted, in its own block.
// With NoTrace the program runs plainly and its stderr is left as it is;
// a JavaScript program runs as ever.
func TestTraceGoesToTheRepairRequest(t *testing.T) {
	const traceback = "Traceback (most recent call last):\n  File \"/workspace/solution.py\", line 2, in f\nZeroDivisionError: division by zero\n"
	const trace = "in f(), line 2:\n    count = 0\n    key = 'sk-trace-secret'\n"
	stderr := traceback + "\n" + lang.TraceMark + "\n" + trace + lang.TraceMark + " end\n"
	for _, c := range []struct {
		name    string
		cfg     Config
		answer  string
		traced  bool
		command string
	}{
		{"Python", Config{}, fence("print(1)\n"), true, "python3 -c"},
		{"NoTrace", Config{NoTrace: true}, fence("print(1)\n"), false, "python3 /workspace/.codeagent/solution.py"},
		{"JavaScript", Config{Lang: "javascript"}, "```javascript\nconsole.log(1)\n```", false, "node /workspace/.codeagent/solution.js"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var commands []string
			sb := &fakeSandbox{fn: func(_ context.Context, spec sandbox.Spec, n int) sandbox.Result {
				commands = append(commands, strings.Join(spec.Command, " "))
				if n == 1 {
					return failWith(stderr)
				}
				return okWith("1\n")
			}}
			c.cfg.Secrets = []string{"sk-trace-secret"}
			p := llmtest.NewFake(c.answer, c.answer)
			a, ws := fakeAgent(t, c.cfg, p, sb, nil)
			res, err := a.Run(context.Background(), Task{Prompt: "print 1", Workspace: ws})
			if err != nil || !res.Success || len(commands) != 2 {
				t.Fatalf("err %v, res %+v, commands %q", err, res, commands)
			}
			if !strings.HasPrefix(commands[0], c.command) || commands[1] != commands[0] {
				t.Errorf("commands %q, want %q...", commands, c.command)
			}
			repair := p.Requests()[1].Messages
			body := repair[len(repair)-1].Content
			recorded := res.History[0].Result.Stderr
			if c.traced {
				if recorded != traceback {
					t.Errorf("recorded stderr %q, want the traceback alone", recorded)
				}
				block := "Values at the point of failure (the program's last frames, innermost last; long values cut):\n```\nin f(), line 2:\n    count = 0\n    key = '[REDACTED]'\n```"
				if !strings.Contains(body, block) || strings.Contains(body, lang.TraceMark) {
					t.Errorf("the repair request lacks the trace's block:\n%s", body)
				}
				return
			}
			if !strings.Contains(recorded, lang.TraceMark) || strings.Contains(body, "Values at the point of failure") {
				t.Errorf("an untraced run's stderr was changed (%q), or the request shows a trace:\n%s", recorded, body)
			}
			if slices.ContainsFunc(commands, func(s string) bool { return strings.Contains(s, " -c ") }) {
				t.Errorf("an untraced run ran the runner: %q", commands)
			}
		})
	}
}
