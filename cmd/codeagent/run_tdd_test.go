package main

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/codeagent/codeagent/agent"
	"github.com/codeagent/codeagent/llm/llmtest"
)

// humanEvalTask reads one task of the shared HumanEval file (beside the
// main checkout or a worktree of it), or skips.
func humanEvalTask(t *testing.T, id string) (entry, test string) {
	t.Helper()
	for _, p := range []string{"../../../shared/data/humaneval.jsonl", "../../../../shared/data/humaneval.jsonl"} {
		f, err := os.Open(p)
		if err != nil {
			continue
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var task struct {
				TaskID     string `json:"task_id"`
				EntryPoint string `json:"entry_point"`
				Test       string
			}
			if err := json.Unmarshal(sc.Bytes(), &task); err != nil {
				t.Fatal(err)
			}
			if task.TaskID == id {
				return task.EntryPoint, task.Test
			}
		}
		t.Fatalf("%s is not in %s", id, p)
	}
	t.Skip("HumanEval (shared/data/humaneval.jsonl) is not here")
	return "", ""
}

// The answers of TestRunCoverageHumanEval: HumanEval/0 wrong, right but
// with a branch its tests never take (line 6), and right.
const (
	closeWrong = "from typing import List\n\n\ndef has_close_elements(numbers: List[float], threshold: float) -> bool:\n    return False\n"
	closeExtra = "from typing import List\n\n\ndef has_close_elements(numbers: List[float], threshold: float) -> bool:\n" +
		"    if threshold <= 0:\n        raise ValueError(\"threshold must be positive\")\n" +
		"    for i, a in enumerate(numbers):\n        for b in numbers[i + 1:]:\n            if abs(a - b) < threshold:\n                return True\n    return False\n"
	closeRight = "from typing import List\n\n\ndef has_close_elements(numbers: List[float], threshold: float) -> bool:\n" +
		"    for i, a in enumerate(numbers):\n        for b in numbers[i + 1:]:\n            if abs(a - b) < threshold:\n                return True\n    return False\n"
)

// TestRunCoverageHumanEval: a run with the HumanEval task's own tests as
// --test-file reports the solution's line coverage, self-reported (--json
// and the human output), leaving no coverage data among the files; a
// failed assertion's compared values reach the repair request.
func TestRunCoverageHumanEval(t *testing.T) {
	entry, test := humanEvalTask(t, "HumanEval/0")
	dir := t.TempDir()
	tests := filepath.Join(dir, "test_close.py")
	code := "from solution import " + entry + "\n\n" + test + "\n\ndef test_check():\n    check(" + entry + ")\n"
	if err := os.WriteFile(tests, []byte(code), 0o644); err != nil {
		t.Fatal(err)
	}
	task := "Write has_close_elements(numbers, threshold): whether any two numbers are closer to each other than threshold"
	type result struct {
		Success   bool
		Attempts  int
		Message   string
		Coverage  *agent.Coverage
		Artifacts []struct{ Path string }
		History   []struct {
			ErrorClass agent.ErrorClass `json:"error_class"`
			Coverage   *agent.Coverage
		}
	}
	run := func(t *testing.T, extra []string, answers ...string) (*llmtest.Server, int, string, string) {
		var replies []llmtest.Reply
		for _, a := range answers {
			replies = append(replies, pyAnswer(a))
		}
		srv, flags := modelServer(t, replies...)
		args := append(append(append([]string{"run"}, flags...), "--no-folder", "--test-file", tests), extra...)
		code, stdout, stderr := runBinary(t, "", []string{"CODEAGENT_PROVIDER=", "OPENAI_API_KEY="}, append(args, task)...)
		return srv, code, stdout, stderr
	}
	decode := func(t *testing.T, stdout string) result {
		var res result
		if err := json.Unmarshal([]byte(stdout), &res); err != nil {
			t.Fatalf("%v\n%s", err, stdout)
		}
		return res
	}

	t.Run("Reported", func(t *testing.T) {
		_, code, stdout, stderr := run(t, []string{"--json", "--max-iterations", "1"}, closeExtra)
		res := decode(t, stdout)
		want := &agent.Coverage{Percent: 88.89, Statements: 9, Covered: 8, MissedLines: []int{6}, SelfReported: true}
		if code != exitOK || !res.Success || !reflect.DeepEqual(res.Coverage, want) {
			t.Fatalf("exit %d, success %v, coverage %+v, want %+v\n%s", code, res.Success, res.Coverage, want, stderr)
		}
		if len(res.Artifacts) != 0 {
			t.Errorf("artifacts %+v: coverage left files in the workspace", res.Artifacts)
		}
	})

	t.Run("Repair", func(t *testing.T) {
		srv, code, stdout, stderr := run(t, []string{"--json"}, closeWrong, closeRight)
		res := decode(t, stdout)
		if code != exitOK || !res.Success || res.Attempts != 2 {
			t.Fatalf("exit %d, success %v after %d attempts: %s\n%s", code, res.Success, res.Attempts, res.Message, stderr)
		}
		if len(res.History) != 2 || res.History[0].ErrorClass != agent.ClassAssertion {
			t.Errorf("history %+v", res.History)
		}
		if c := res.Coverage; c == nil || c.Percent != 100 || len(c.MissedLines) != 0 || !c.SelfReported {
			t.Errorf("final coverage %+v", c)
		}
		// pytest's compared values: the assertion and where its value came from.
		mustHave(t, "the repair request after the failed test", string(srv.Requests()[1].Body), "assert False == True", "where False = ")
	})

	t.Run("Human", func(t *testing.T) {
		_, code, stdout, stderr := run(t, []string{"--max-iterations", "1"}, closeExtra)
		if code != exitOK || !strings.Contains(stdout, "coverage 89% (self-reported; line 6 not run)") {
			t.Fatalf("exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
		}
	})
}

func mustHave(t *testing.T, what, text string, subs ...string) {
	t.Helper()
	for _, s := range subs {
		if !strings.Contains(text, s) {
			t.Errorf("%s lacks %q:\n%s", what, s, text)
		}
	}
}

// tddResult is what the test-driven runs below read of run --json.
type tddResult struct {
	Success  bool
	Language string
	Attempts int
	Output   string
	Tests    string
	History  []struct {
		ErrorClass agent.ErrorClass `json:"error_class"`
	}
}

// tddRun runs `run --lang LANG --tests TASK` with a model that answers
// the tests, then a wrong program, then a right one (answers in LANG's
// code blocks); it checks the run took two attempts to print 42 with the
// tests the model wrote, and returns the model's three requests.
func tddRun(t *testing.T, language, task, tests, wrong, right string) []string {
	t.Helper()
	say := func(code string) llmtest.Reply { return llmtest.Say("```" + language + "\n" + code + "```") }
	srv, flags := modelServer(t, say(tests), say(wrong), say(right))
	args := append(append([]string{"run"}, flags...), "--no-folder", "--json", "--lang", language, "--tests", task)
	code, stdout, stderr := runBinary(t, "", []string{"CODEAGENT_PROVIDER=", "OPENAI_API_KEY="}, args...)
	var res tddResult
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || code != exitOK {
		t.Fatalf("exit %d, %v\nstdout %s\nstderr %s", code, err, stdout, stderr)
	}
	if !res.Success || res.Language != language || res.Attempts != 2 || res.Output != "42\n" || res.Tests != tests ||
		len(res.History) != 2 || res.History[0].ErrorClass != agent.ClassAssertion {
		t.Fatalf("result %+v\nstderr %s", res, stderr)
	}
	var bodies []string
	for _, r := range srv.Requests() {
		bodies = append(bodies, string(r.Body))
	}
	if len(bodies) != 3 {
		t.Fatalf("%d requests, want 3", len(bodies))
	}
	return bodies
}

// TestRunJavaScriptTests: `run --lang javascript --tests` has the model
// write node tests, accepts them (they fail against the stub), sends a
// wrong solution's node --test failure back with the compared values, and
// succeeds with the right one; the tests are the result's.
func TestRunJavaScriptTests(t *testing.T) {
	main := "\nif (process.argv[1] === __filename) {\n  console.log(mul(6, 7));\n}\n"
	reqs := tddRun(t, "javascript", "mul(a, b) multiplies two numbers; the program prints mul(6, 7)",
		"const test = require(\"node:test\");\nconst assert = require(\"node:assert\");\nconst { mul } = require(\"./solution.js\");\n\n"+
			"test(\"mul\", () => {\n  assert.strictEqual(mul(3, 4), 12);\n});\n",
		"function mul(a, b) {\n  return a + b;\n}\nmodule.exports = { mul };\n"+main,
		"function mul(a, b) {\n  return a * b;\n}\nmodule.exports = { mul };\n"+main)
	mustHave(t, "the tests request", reqs[0], "solution.test.js", "node:test", "require(\\\"./solution.js\\\")")
	mustHave(t, "the code request", reqs[1], "node --test", "module.exports")
	// node's failure with the compared values of assert.strictEqual.
	mustHave(t, "the repair request", reqs[2], "The tests failed (node --test exit status 1)", "not ok 1 - mul",
		"7 !== 12", "expected: 12", "actual: 7")
}

// TestRunMinCoverageUsage: --min-coverage is refused, whatever the
// language, saying why; test-driven mode names its languages.
func TestRunMinCoverageUsage(t *testing.T) {
	_, flags := modelServer(t)
	tests := filepath.Join(t.TempDir(), "t.test.js")
	os.WriteFile(tests, []byte("require(\"node:test\");\n"), 0o644)
	for _, c := range []struct {
		extra []string
		want  string
	}{
		{[]string{"--min-coverage", "50", "x"}, "--min-coverage is refused: coverage is self-reported"},
		{[]string{"--min-coverage", "100", "--tests", "x"}, "--min-coverage is refused: coverage is self-reported"},
		{[]string{"--min-coverage", "50", "--lang", "javascript", "--test-file", tests, "x"}, "--min-coverage is refused"},
		{[]string{"--lang", "bash", "--tests", "x"}, "test-driven mode needs go, javascript or python, not bash"},
	} {
		args := append(append([]string{"run", "--no-folder"}, flags...), c.extra...)
		if code, _, stderr := runCLI(t, "", args...); code != exitUsage || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q", c.extra, code, stderr)
		}
	}
}

// TestRunGoTests: --lang go --tests: the model's go tests fail to build on
// the stub (they call what it does not define) and are accepted; a wrong
// solution fails them and the repair request shows go test's failure with
// the values the test printed; the right one succeeds.
func TestRunGoTests(t *testing.T) {
	main := "\nfunc main() { fmt.Println(Mul(6, 7)) }\n"
	reqs := tddRun(t, "go", "Mul(a, b) multiplies two ints; the program prints Mul(6, 7)",
		"package main\n\nimport \"testing\"\n\nfunc TestMul(t *testing.T) {\n\tif got := Mul(3, 4); got != 12 {\n\t\tt.Errorf(\"Mul(3, 4) = %d, want 12\", got)\n\t}\n}\n",
		"package main\n\nimport \"fmt\"\n\nfunc Mul(a, b int) int { return a + b }\n"+main,
		"package main\n\nimport \"fmt\"\n\nfunc Mul(a, b int) int { return a * b }\n"+main)
	mustHave(t, "the tests request", reqs[0], "solution_test.go", "testing.T")
	mustHave(t, "the code request", reqs[1], "go test", "package main")
	mustHave(t, "the repair request", reqs[2], "The tests failed (go test exit status 1)", "--- FAIL: TestMul", "Mul(3, 4) = 7, want 12")
}

// TestRunGoCoverage: a Go --test-file (its extension makes the run Go's):
// a program with a branch the tests never take succeeds with that line
// reported not run, self-reported, and the output shows no other count
// (go test's own summary counts func main).
func TestRunGoCoverage(t *testing.T) {
	tests := filepath.Join(t.TempDir(), "sign_test.go")
	os.WriteFile(tests, []byte("package main\n\nimport \"testing\"\n\nfunc TestSign(t *testing.T) {\n"+
		"\tfor _, c := range []struct{ x, want int }{{5, 1}, {0, 0}, {-2, -1}} {\n"+
		"\t\tif got := Sign(c.x); got != c.want {\n\t\t\tt.Errorf(\"Sign(%d) = %d, want %d\", c.x, got, c.want)\n\t\t}\n\t}\n}\n"), 0o644)
	sign := func(extra string) llmtest.Reply {
		return llmtest.Say("```go\npackage main\n\nimport \"fmt\"\n\nfunc Sign(x int) int {\n" + extra +
			"\tif x < 0 {\n\t\treturn -1\n\t}\n\tif x == 0 {\n\t\treturn 0\n\t}\n\treturn 1\n}\n\nfunc main() { fmt.Println(Sign(3)) }\n```")
	}
	_, flags := modelServer(t, sign("\tif x > 1000 {\n\t\treturn 1\n\t}\n"))
	args := append(append([]string{"run"}, flags...), "--no-folder", "--json", "--test-file", tests,
		"Sign(x) is -1, 0 or 1 as x is negative, zero or positive; the program prints Sign(3)")
	code, stdout, stderr := runBinary(t, "", []string{"CODEAGENT_PROVIDER=", "OPENAI_API_KEY="}, args...)
	var res struct {
		Success  bool
		Language string
		Output   string
		Coverage *agent.Coverage
		History  []struct{ Coverage *agent.Coverage }
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || code != exitOK {
		t.Fatalf("exit %d, %v\nstdout %s\nstderr %s", code, err, stdout, stderr)
	}
	if !res.Success || res.Language != "go" || !strings.HasPrefix(res.Output, "ok ") || strings.Contains(res.Output, "coverage:") || len(res.History) != 1 {
		t.Fatalf("result %+v\nstderr %s", res, stderr)
	}
	want := &agent.Coverage{Percent: 85.71, Statements: 7, Covered: 6, MissedLines: []int{7}, SelfReported: true}
	if !reflect.DeepEqual(res.Coverage, want) || !reflect.DeepEqual(res.History[0].Coverage, want) {
		t.Errorf("coverage %+v, want %+v", res.Coverage, want)
	}
}
