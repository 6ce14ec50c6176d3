package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/codeagent/codeagent/agent"
	"github.com/codeagent/codeagent/llm/llmtest"
)

func pyCallReply(code string) llmtest.Reply {
	return llmtest.Call(llmtest.ToolCall("execute_python", map[string]string{"code": code}))
}

// run --mode tools, end to end: the model's tool calls run in the kernel,
// the manifest's unlisted tool is refused, progress and events show each
// call, --json has the steps and the replay, --out gets solution.py.
func TestRunToolMode(t *testing.T) {
	manifest := filepath.Join(t.TempDir(), "agent.yaml")
	os.WriteFile(manifest, []byte("agent:\n  tools:\n    - name: execute_python\n      timeout: 20\n"), 0o644)
	_, flags := modelServer(t,
		llmtest.Call(llmtest.ToolCall("execute_bash", map[string]string{"code": "echo hi > hi.txt"})),
		pyCallReply("import pandas as pd\n\ndf = pd.read_csv(\"sales.csv\")\nprint(list(df.columns))\n"),
		pyCallReply("df[\"revenue\"] = df[\"units\"] * df[\"unit_price\"]\nprint(\"Total revenue:\", df[\"revenue\"].sum())\n"),
		llmtest.Say("The total revenue is printed."),
		llmtest.Say(`{"task_complete": true, "missing": ""}`),
	)
	out := filepath.Join(t.TempDir(), "results")
	events := filepath.Join(t.TempDir(), "events.jsonl")
	args := append(append([]string{"run"}, flags...), "--mode", "tools", "--manifest", manifest, "--file", salesFile(t),
		"--out", out, "--json", "--progress", "--events", events, "print the total revenue of sales.csv")
	code, stdout, stderr := runCLI(t, "", args...)
	if code != exitOK {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	var res agent.Result
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, stdout)
	}
	if !res.Success || res.Mode != "tools" || res.Attempts != 1 || !strings.Contains(res.Output, "Total revenue: 245.5") {
		t.Fatalf("result %+v", res)
	}
	h := res.History[0]
	if len(h.Steps) != 3 || !h.Steps[0].Refused || h.Steps[0].Tool != "execute_bash" || h.Steps[1].Result == nil ||
		h.Steps[2].ExecutionCount != 2 || h.Replay == nil || h.Replay.Status != "ok" {
		t.Errorf("history %+v", h)
	}
	if _, err := os.Stat(filepath.Join(out, "hi.txt")); err == nil {
		t.Error("the unlisted tool ran")
	}
	if b, err := os.ReadFile(filepath.Join(out, "solution.py")); err != nil || !strings.Contains(string(b), "Total revenue") {
		t.Errorf("solution.py in --out: %v", err)
	}
	for _, want := range []string{"round 1/5 (tools) · thinking", "step 1/20 execute_bash ✗ bad_tool_call: the tool execute_bash is not offered here",
		"step 2/20 execute_python · running ✓", "round 1/5 · verified ✓", "round 1/5 · replayed in a fresh sandbox ✓", "done: success after 1 round(s)"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("progress lacks %q:\n%s", want, stderr)
		}
	}
	b, _ := os.ReadFile(events)
	for _, want := range []string{`"type":"tool_call"`, `"tool":"execute_bash"`, `"type":"tool_result"`, `"type":"replayed"`, `"mode":"tools"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("events lack %s", want)
		}
	}
}

func TestRunModeUsageErrors(t *testing.T) {
	_, flags := modelServer(t)
	for _, extra := range [][]string{
		{"--mode", "tool", "x"},
		{"--mode", "tools", "--tests", "x"},
		{"--mode", "program", "--max-steps", "5", "x"},
		{"--max-steps", "0", "x"},
		{"--mode", "tools", "--allow-host", "example.com", "x"},
	} {
		args := append(append([]string{"run"}, flags...), extra...)
		if code, _, stderr := runCLI(t, "", args...); code != exitUsage || stderr == "" {
			t.Errorf("%v: exit %d, stderr %q", extra, code, stderr)
		}
	}
}

// run_task with mode tools: the cells run in the MCP session's kernel and
// the progress notifications name each round and step.
func TestMCPRunTaskToolMode(t *testing.T) {
	_, flags := modelServer(t, pyCallReply("x = 6 * 7\n"), pyCallReply("print('the answer is', x)\n"), llmtest.Say("Printed."),
		llmtest.Say(`{"task_complete": true, "missing": ""}`))
	c := startMCP(t, flags...)
	var out struct {
		Success bool
		Output  string
		Code    string
	}
	c.call(t, "run_task", map[string]any{"task": "print the answer", "mode": "tools", "max_steps": 4}, &out)
	if !out.Success || out.Output != "the answer is 42\n" || !strings.Contains(out.Code, "x = 6 * 7") {
		t.Fatalf("run_task: %+v", out)
	}
	res := c.call(t, "run_task", map[string]any{"task": "x", "mode": "tools", "tests": "def test_x(): pass\n"}, nil)
	if !res.IsError {
		t.Error("mode tools with tests was accepted")
	}
}
