package agent

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/codeagent/codeagent/lang"
	"github.com/codeagent/codeagent/llm/llmtest"
	"github.com/codeagent/codeagent/sandbox"
)

// TestTraceGoesToTheRepairRequest: a Python program runs traced with a
// fresh key on its stdin; the trace it writes after its traceback between
// markers with that key leaves the stderr that is recorded and shown,
// reaches the repair request, redacted, in its own block, and is kept as
// cut in the executed event and the attempt's history. With NoTrace the
// program runs plainly and its stderr is left as it is; a JavaScript
// program runs as ever.
func TestTraceGoesToTheRepairRequest(t *testing.T) {
	const traceback = "Traceback (most recent call last):\n  File \"/workspace/solution.py\", line 2, in f\nZeroDivisionError: division by zero\n"
	const trace = "in f(), line 2:\n    count = 0\n    key = 'sk-trace-secret'\n"
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
			var commands, keys []string
			sb := &fakeSandbox{fn: func(_ context.Context, spec sandbox.Spec, n int) sandbox.Result {
				commands = append(commands, strings.Join(spec.Command, " "))
				key := "none"
				if spec.Stdin != nil {
					b, _ := io.ReadAll(spec.Stdin)
					key = strings.TrimSuffix(string(b), "\n")
				}
				keys = append(keys, key)
				if n == 1 {
					return failWith(traceback + "\n" + lang.TraceMark + " " + key + " ====\n" + trace + lang.TraceMark + " " + key + " end ====\n")
				}
				return okWith("1\n")
			}}
			c.cfg.Secrets = []string{"sk-trace-secret"}
			p := llmtest.NewFake(c.answer, c.answer)
			var events []Event
			a, ws := fakeAgent(t, c.cfg, p, sb, ObserverFunc(func(e Event) { events = append(events, e) }))
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
				if len(keys) != 2 || len(keys[0]) != 32 || keys[0] == keys[1] || strings.Contains(commands[0], keys[0]) {
					t.Errorf("keys %q: want a fresh key a run, on stdin only", keys)
				}
				cut := []Cut{{What: "trace", Stream: "stderr", Text: strings.ReplaceAll(trace, "sk-trace-secret", Redacted)}}
				if !reflect.DeepEqual(res.History[0].Cut, cut) || res.History[1].Cut != nil {
					t.Errorf("history's cut %+v, %+v; want %+v, none", res.History[0].Cut, res.History[1].Cut, cut)
				}
				var executed []Event
				for _, e := range events {
					if e.Type == EventExecuted {
						executed = append(executed, e)
					}
				}
				if len(executed) != 2 || !reflect.DeepEqual(executed[0].Cut, cut) || executed[1].Cut != nil {
					t.Errorf("executed events %+v", executed)
				}
				block := "Values at the point of failure (the program's last frames, innermost last; long values cut):\n```\nin f(), line 2:\n    count = 0\n    key = '[REDACTED]'\n```"
				if !strings.Contains(body, block) || strings.Contains(body, lang.TraceMark) {
					t.Errorf("the repair request lacks the trace's block:\n%s", body)
				}
				return
			}
			if !strings.Contains(recorded, lang.TraceMark) || strings.Contains(body, "Values at the point of failure") || res.History[0].Cut != nil {
				t.Errorf("an untraced run's stderr was changed (%q), or the request shows a trace:\n%s", recorded, body)
			}
			if slices.ContainsFunc(commands, func(s string) bool { return strings.Contains(s, " -c ") }) {
				t.Errorf("an untraced run ran the runner: %q", commands)
			}
		})
	}
}

// The trace shows the frames of the folder's own modules too: the program
// lies in codeagent's .codeagent/, the folder's files in the working
// directory, and both are the program's own (libraries are not).
func TestTraceShowsTheFoldersModules(t *testing.T) {
	sb, _ := realParts(t)
	ws := t.TempDir()
	os.Mkdir(filepath.Join(ws, lang.OwnDir), 0o755)
	os.WriteFile(filepath.Join(ws, "helpers.py"), []byte("def ratio(total, count):\n    share = total\n    return share / count\n"), 0o644)
	os.WriteFile(filepath.Join(ws, lang.OwnDir, "solution.py"), []byte("import sys, os\nsys.path.insert(0, os.getcwd())\nimport helpers\nrows = 0\nprint(helpers.ratio(17, rows))\n"), 0o644)
	py, _ := lang.Lookup("python")
	key := lang.NewTraceKey()
	res, err := sb.Run(context.Background(), sandbox.Spec{Command: py.TracedCommand("/workspace/" + lang.OwnDir + "/solution.py"),
		Workspace: ws, Stdin: bytes.NewReader(key.Stdin())})
	if err != nil {
		t.Fatal(err)
	}
	_, trace := key.Split(res.Stderr)
	if !strings.Contains(trace, "in ratio() in helpers.py, line 3") || !strings.Contains(trace, "share = 17") || !strings.Contains(trace, "rows = 0") {
		t.Errorf("trace %q\nstderr %s", trace, res.Stderr)
	}
}
