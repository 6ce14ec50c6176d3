package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/codeagent/codeagent/llm/llmtest"
)

// The checker stops what is dangerous, not what is common: attacks
// spelt to slip past it are refused through the real binary, and the
// programs everyone writes pass.

// goEnvironRead reads the parent's environment through a path folded from
// a sum; goSignal signals the parent through a Process it builds.
const (
	goEnvironRead = "package main\n\nimport (\n\t\"fmt\"\n\t\"os\"\n)\n\n" +
		"func main() {\n\tb, _ := os.ReadFile(\"/pr\" + \"oc/self/environ\")\n\tfmt.Println(\"LEAKED\", len(b))\n}\n"
	goSignal = "package main\n\nimport (\n\t\"fmt\"\n\t\"os\"\n)\n\n" +
		"func main() {\n\terr := (&os.Process{Pid: os.Getppid()}).Signal(os.Interrupt)\n\tfmt.Println(\"SIGNALLED\", err)\n}\n"
)

// runAttempt is an attempt of run --json as the tests read it.
type runAttempt struct {
	Check []struct {
		Rule string `json:"rule"`
		Kind string `json:"kind"`
	} `json:"check"`
	Result *struct {
		Stdout string `json:"stdout"`
	} `json:"result"`
}

// runJSON runs "codeagent run --json" with a scripted model in dir and
// returns its result.
func runJSON(t *testing.T, dir string, replies []llmtest.Reply, args ...string) (int, struct {
	Success bool         `json:"success"`
	Output  string       `json:"output"`
	History []runAttempt `json:"history"`
}, string) {
	t.Helper()
	_, flags := modelServer(t, replies...)
	all := append(append(append([]string{"run", "--json", "--no-verify"}, flags...), args...), "do the task")
	code, stdout, stderr := runBinary(t, dir, nil, all...)
	var res struct {
		Success bool         `json:"success"`
		Output  string       `json:"output"`
		History []runAttempt `json:"history"`
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("run --json: exit %d, %v\n%s\n%s", code, err, stdout, stderr)
	}
	return code, res, stderr
}

// rules lists an attempt's safety findings' rules.
func (a runAttempt) rules() []string {
	var out []string
	for _, f := range a.Check {
		if f.Kind == "" {
			out = append(out, f.Rule)
		}
	}
	return out
}

// TestGoSpellingsAreRefused: a Go program reading /proc/self/environ
// through a path folded from a sum, and one signalling its parent through
// an os.Process it builds, are refused by check and never run in a run.
func TestGoSpellingsAreRefused(t *testing.T) {
	dir := t.TempDir()
	for name, code := range map[string]string{"environ.go": goEnvironRead, "signal.go": goSignal} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(code), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for name, rule := range map[string]string{"environ.go": "path-outside-workspace", "signal.go": "forbidden-function"} {
		code, stdout, stderr := runBinary(t, dir, nil, "check", name)
		if code != 1 || !strings.Contains(stdout, rule) {
			t.Errorf("check %s: exit %d, want 1 with %s\n%s%s", name, code, rule, stdout, stderr)
		}
	}
	code, res, stderr := runJSON(t, t.TempDir(), []llmtest.Reply{
		llmtest.Say("```go\n" + goEnvironRead + "```"), llmtest.Say("```go\n" + goSignal + "```"),
		llmtest.Say("```go\n" + goProgram + "```")}, "--lang", "go")
	if code != 0 || !res.Success || len(res.History) != 3 || strings.TrimSpace(res.Output) != "42" {
		t.Fatalf("exit %d, success %v, %d attempts, output %q\n%s", code, res.Success, len(res.History), res.Output, stderr)
	}
	for i, want := range []string{"path-outside-workspace", "forbidden-function"} {
		a := res.History[i]
		if !strings.Contains(strings.Join(a.rules(), " "), want) || a.Result != nil {
			t.Errorf("attempt %d: findings %v, ran: %v; want %s and no run", i+1, a.rules(), a.Result != nil, want)
		}
	}
}
