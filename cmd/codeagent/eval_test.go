package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/codeagent/codeagent/llm/llmtest"
)

// evalTasksFile writes three small HumanEval-format tasks.
func evalTasksFile(t *testing.T) string {
	t.Helper()
	lines := []string{
		`{"task_id": "T/0", "prompt": "def add(a, b):\n    \"\"\"Return a + b.\"\"\"\n", "entry_point": "add", "test": "def check(candidate):\n    assert candidate(2, 3) == 5\n"}`,
		`{"task_id": "T/1", "prompt": "def neg(x):\n    \"\"\"Return -x.\"\"\"\n", "entry_point": "neg", "test": "def check(candidate):\n    assert candidate(4) == -4\n"}`,
		`{"task_id": "T/2", "prompt": "def rev(s):\n    \"\"\"Return s reversed.\"\"\"\n", "entry_point": "rev", "test": "def check(candidate):\n    assert candidate('abc') == 'cba'\n"}`,
	}
	p := filepath.Join(t.TempDir(), "tiny.jsonl")
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

var (
	evalAdd      = pyAnswer("def add(a, b):\n    return a + b\n")
	evalNegWrong = pyAnswer("def neg(x):\n    return x\n")
	evalNeg      = pyAnswer("def neg(x):\n    return -x\n")
	evalRev      = pyAnswer("def rev(s):\n    return s[::-1]\n")
)

// A run prints the table and writes results and a report; a second run
// with the same results has nothing left to do; --only reruns one task and
// the report takes its latest outcome.
func TestEvalRunResumeAndOnly(t *testing.T) {
	srv, flags := modelServer(t, evalAdd, evalNegWrong, evalRev)
	dir := t.TempDir()
	results, report := filepath.Join(dir, "r.jsonl"), filepath.Join(dir, "r.md")
	args := append(append([]string{"eval"}, flags...), "--tasks", evalTasksFile(t), "--concurrency", "1", "--results", results)
	code, stdout, stderr := runCLI(t, "", append(args, "--report", report, "--progress")...)
	if code != exitOK {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	for _, want := range []string{"## tiny · test-model · feedback none · up to 1 attempt(s)", "| tasks | pass@attempt 1 | final |",
		"| 3 | 66.7% (2) | 66.7% (2) | 1.00 | 15 |", "failed: T/1", "why final code failed the tests: assertion 1"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	if !strings.Contains(stderr, "[########################] 3/3 · pass 2 (66.7%)") {
		t.Errorf("no progress bar on stderr:\n%q", stderr)
	}
	if md, err := os.ReadFile(report); err != nil || !strings.Contains(string(md), "| 3 | 66.7% (2) |") {
		t.Errorf("report %v:\n%s", err, md)
	}
	if b, _ := os.ReadFile(results); strings.Count(string(b), "\n") != 3 {
		t.Errorf("results:\n%s", b)
	}

	code, stdout, stderr = runCLI(t, "", args...) // nothing left: no request reaches the model
	if code != exitOK || !strings.Contains(stderr, "every selected task has results") || !strings.Contains(stdout, "| 3 | 66.7% (2) |") {
		t.Fatalf("rerun: exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}

	srv.Push(evalNeg)
	code, stdout, stderr = runCLI(t, "", append(args, "--only", "T/1", "--json")...)
	if code != exitOK {
		t.Fatalf("--only: exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	var sum struct {
		Scored int `json:"scored"`
		Final  struct {
			Passed int     `json:"passed"`
			Rate   float64 `json:"rate"`
		} `json:"final"`
	}
	if err := json.Unmarshal([]byte(stdout), &sum); err != nil || sum.Scored != 3 || sum.Final.Passed != 3 || sum.Final.Rate != 1 {
		t.Errorf("--only summary %+v (%v):\n%s", sum, err, stdout)
	}
	if got := len(srv.Requests()); got != 4 {
		t.Errorf("%d model requests, want 4", got)
	}
}

// In tests mode the failing hidden test goes back and the repair passes.
func TestEvalTestsFeedbackAndCompare(t *testing.T) {
	_, flags := modelServer(t, evalAdd, evalNegWrong, evalNeg, evalRev)
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.jsonl"), filepath.Join(dir, "b.jsonl")
	args := append(append([]string{"eval"}, flags...), "--tasks", evalTasksFile(t), "--concurrency", "1", "--feedback", "tests", "--max-iterations", "2", "--results", a)
	code, stdout, stderr := runCLI(t, "", args...)
	if code != exitOK || !strings.Contains(stdout, "| 3 | 66.7% (2) | 100.0% (3) | 100.0% (3) | 1.33 |") {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	_, flags = modelServer(t, evalAdd, evalNegWrong, evalRev)
	code, _, stderr = runCLI(t, "", append(append([]string{"eval"}, flags...), "--tasks", evalTasksFile(t), "--concurrency", "1", "--results", b)...)
	if code != exitOK {
		t.Fatalf("second run: exit %d: %s", code, stderr)
	}
	code, stdout, stderr = runCLI(t, "", "eval", "--compare", a+","+b)
	if code != exitOK {
		t.Fatalf("compare: exit %d: %s", code, stderr)
	}
	for _, want := range []string{"Comparison on the 3 task(s)", "tests, ≤2 | 66.7% (2) | 100.0% (3) | 100.0% (3)", "none, ≤1 | 66.7% (2) | – | 66.7% (2)",
		"only run 1 passes: 1 task(s): T/1"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("comparison lacks %q:\n%s", want, stdout)
		}
	}
}

// The built-in suite runs end to end with a model that answers the
// reference solution.
func TestEvalBuiltinSuite(t *testing.T) {
	ref, err := os.ReadFile("../../eval/suites/dataanalysis/testdata/reference/region_revenue.py")
	if err != nil {
		t.Fatal(err)
	}
	_, flags := modelServer(t, pyAnswer(string(ref)))
	code, stdout, stderr := runCLI(t, "", append(append([]string{"eval"}, flags...), "--tasks", "builtin:dataanalysis", "--limit", "1", "--json")...)
	if code != exitOK || !strings.Contains(stdout, `"suite": "dataanalysis"`) || !strings.Contains(stdout, `"rate": 1`) {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
}

func TestEvalUsageErrors(t *testing.T) {
	_, flags := modelServer(t, llmtest.Say("unused"))
	tasks := evalTasksFile(t)
	bad := filepath.Join(t.TempDir(), "bad.jsonl")
	os.WriteFile(bad, []byte(`{"task_id": "x"}`+"\n"), 0o644)
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "--tasks FILE is required"},
		{[]string{"--tasks", tasks, "--feedback", "maybe"}, "want none, tests or self"},
		{[]string{"--tasks", tasks, "--max-iterations", "3"}, "--feedback none makes one attempt"},
		{[]string{"--tasks", tasks, "--concurrency", "0"}, "--concurrency 0"},
		{[]string{"--tasks", tasks, "--only", "T/9"}, "no task T/9"},
		{[]string{"--tasks", tasks, "--temperature", "hot"}, "--temperature"},
		{[]string{"--tasks", bad}, "bad.jsonl:1: HumanEval task: missing or empty field prompt, entry_point, test"},
		{[]string{"--tasks", "builtin:nope"}, "the built-in suite is builtin:dataanalysis"},
		{[]string{"--compare", tasks}, "not a result record"},
		{[]string{"--tasks", tasks, "extra"}, "eval takes no arguments"},
	} {
		code, _, stderr := runCLI(t, "", append(append([]string{"eval"}, flags...), c.args...)...)
		if code != exitUsage || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q, want %q", c.args, code, stderr, c.want)
		}
	}
}

// --samples-file scores completions (bodies, whole modules) without a
// model; the results file records every sample, so a second run has
// nothing to do; pass@k and the settings are in the report.
func TestEvalSamplesFile(t *testing.T) {
	dir := t.TempDir()
	samples := filepath.Join(dir, "samples.jsonl")
	lines := []string{
		`{"task_id": "T/0", "completion": "    return a + b\n"}`,
		`{"task_id": "T/0", "completion": "def add(a, b):\n    return a - b\n"}`,
		`{"task_id": "T/1", "completion": "def neg(x):\n    return -x\n"}`,
		`{"task_id": "T/1", "completion": "    print('codeagent-eval: check passed'); raise SystemExit(0)\n"}`,
	}
	os.WriteFile(samples, []byte(strings.Join(lines, "\n")+"\n"), 0o644)
	results := filepath.Join(dir, "r.jsonl")
	args := []string{"eval", "--tasks", evalTasksFile(t), "--samples-file", samples, "--results", results, "--k", "1,2"}
	code, stdout, stderr := runCLI(t, "", args...)
	if code != exitOK {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	for _, want := range []string{"samples:samples.jsonl", "| tasks | samples |", "| 2 | 4 | 50.0% (2) |", "pass@1 50.0%, pass@2 100.0%",
		"scoring settings: humaneval harness, 3s, memory 2 GiB, 1024 processes"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	b, _ := os.ReadFile(results)
	if strings.Count(string(b), "\n") != 4 || !strings.Contains(string(b), `"scored_form":"completion"`) || !strings.Contains(string(b), `"sample":1`) {
		t.Errorf("results:\n%s", b)
	}
	code, stdout, stderr = runCLI(t, "", args...)
	if code != exitOK || !strings.Contains(stderr, "every selected task has results") || !strings.Contains(stdout, "pass@2 100.0%") {
		t.Errorf("rerun: exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	code, _, stderr = runCLI(t, "", "eval", "--tasks", evalTasksFile(t), "--samples-file", samples, "--samples", "3")
	if code != exitUsage || !strings.Contains(stderr, "takes no --samples") {
		t.Errorf("--samples with --samples-file: exit %d: %s", code, stderr)
	}
}

// --samples N runs N agent runs a task and reports pass@k beside the
// per-attempt rates; a larger N later adds only the missing samples.
func TestEvalSamplesAndPassAtK(t *testing.T) {
	srv, flags := modelServer(t, evalAdd, evalAdd, evalNegWrong, evalNeg)
	dir := t.TempDir()
	results := filepath.Join(dir, "r.jsonl")
	args := append(append([]string{"eval"}, flags...), "--tasks", evalTasksFile(t), "--limit", "2", "--concurrency", "1", "--results", results)
	code, stdout, stderr := runCLI(t, "", append(args, "--samples", "2")...)
	if code != exitOK || !strings.Contains(stdout, "| 2 | 4 | 75.0% (3) | 75.0% (3) |") || !strings.Contains(stdout, "pass@1 75.0%") {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	srv.Push(evalAdd, evalNeg)
	code, stdout, stderr = runCLI(t, "", append(args, "--samples", "3", "--k", "1,3")...)
	if code != exitOK || !strings.Contains(stdout, "| 2 | 6 |") || !strings.Contains(stdout, "pass@3 100.0%") {
		t.Fatalf("more samples: exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	if got := len(srv.Requests()); got != 6 {
		t.Errorf("%d model requests, want 6", got)
	}
}
