package agent

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/codeagent/codeagent/lang"
	"github.com/codeagent/codeagent/sandbox"
)

// runnerCase is one test file of a language with what its runner must make
// of it, against the stub and against a right solution.
type runnerCase struct {
	name, tests             string
	onStub, onRight         testOutcome
	stubFailLine, rightLine string // in FailedLine's summary (on the stub)
}

// runnerCases exercise every entry of testRunners: tests that call the
// solution fail on the stub (so they are accepted) and pass on a right
// solution; vacuous tests pass on the stub; a file without tests and a
// file that cannot load are told apart from failing tests.
var runnerCases = map[string]struct {
	right string
	cases []runnerCase
}{
	"python": {"def add(a, b):\n    return a + b\n", []runnerCase{
		{"calls", "from solution import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n", testsFailed, testsPassed, "FAILED .codeagent/test_solution.py::test_add - NotImplementedError", ""},
		{"vacuous", "from solution import add\n\n\ndef test_true():\n    assert True\n", testsPassed, testsPassed, "", ""},
		{"none", "from solution import add\n\n\ndef check_add():\n    assert add(2, 3) == 5\n", testsNone, testsNone, "", ""},
		{"broken", "from solution import add\n\ndef test_add(:\n", testsBroken, testsBroken, "", ""},
	}},
	"javascript": {"function add(a, b) { return a + b; }\nmodule.exports = { add };\n", []runnerCase{
		{"calls", "const test = require(\"node:test\");\nconst assert = require(\"node:assert\");\nconst { add } = require(\"./solution.js\");\n\ntest(\"add\", () => { assert.strictEqual(add(2, 3), 5); });\n", testsFailed, testsPassed, "not ok 1 - add: not implemented: add", ""},
		{"vacuous", "const test = require(\"node:test\");\nconst assert = require(\"node:assert\");\nconst { add } = require(\"./solution.js\");\n\ntest(\"add\", () => { assert.ok(add); });\n", testsPassed, testsPassed, "", ""},
		{"none", "const { add } = require(\"./solution.js\");\n", testsNone, testsNone, "", ""},
		{"broken", "const { add } = require(\"./solution.js\");\ntest(\"add\", () => {\n", testsBroken, testsBroken, "", ""},
		{"load fails", "const { add } = require(\"./solution.js\");\nadd(1, 2);\n", testsBroken, testsNone, "", ""},
	}},
	"go": {"package main\n\nfunc Add(a, b int) int { return a + b }\n\nfunc main() {}\n", []runnerCase{
		{"calls", "package main\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {\n\tif got := Add(2, 3); got != 5 {\n\t\tt.Errorf(\"Add(2, 3) = %d, want 5\", got)\n\t}\n}\n", testsFailed, testsPassed, "", ""},
		{"vacuous", "package main\n\nimport \"testing\"\n\nfunc TestTrue(t *testing.T) {}\n", testsPassed, testsPassed, "", ""},
		{"none", "package main\n\nimport \"testing\"\n\nfunc helper(t *testing.T) { _ = Add }\n", testsFailed, testsNone, "", ""},
		{"broken", "package main\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) { x := \n}\n", testsBroken, testsBroken, "", ""},
		{"wrong type", "package main\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) { var s string = 3; _ = s }\n", testsBroken, testsBroken, "", ""},
	}},
}

// TestTestRunners runs each language's test runner in the real sandbox on
// test files against its stub and against a right solution.
func TestTestRunners(t *testing.T) {
	sb, _ := realParts(t)
	var langs []string
	for l := range testRunners {
		langs = append(langs, l)
	}
	sort.Strings(langs)
	for _, l := range langs {
		tr := testRunners[l]
		rc, ok := runnerCases[l]
		if !ok {
			t.Errorf("%s has a test runner but no cases here", l)
			continue
		}
		lg, err := lang.Lookup(l)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range rc.cases {
			t.Run(l+"/"+c.name, func(t *testing.T) {
				dir := t.TempDir()
				write := func(name, text string) {
					os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o755)
					if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
						t.Fatal(err)
					}
				}
				write(tr.File, c.tests)
				for _, s := range []struct {
					solution string
					want     testOutcome
					line     string
				}{{tr.Stub, c.onStub, c.stubFailLine}, {rc.right, c.onRight, c.rightLine}} {
					write(ownFile(SolutionBase+lg.Ext), s.solution)
					res, err := sb.Run(context.Background(), sandbox.Spec{Command: tr.Command, Workspace: dir, Env: lg.Environ(false)})
					if err != nil {
						t.Fatal(err)
					}
					if got := tr.Outcome(res); got != s.want {
						t.Fatalf("outcome %d, want %d (%s exit %d)\nstdout %s\nstderr %s", got, s.want, res.Status, res.ExitCode, res.Stdout, res.Stderr)
					}
					if s.line != "" {
						if got := tr.FailedLine(string(res.Stdout)); !strings.HasPrefix(got, s.line) {
							t.Errorf("failed line %q, want %q", got, s.line)
						}
					}
				}
			})
		}
	}
}

// TestNodeOutcomeNested: node 18 (Debian's, in the Docker image) nests a
// file's tests under a test point for the file; failing tests there are
// failed tests, not a file that could not run.
func TestNodeOutcomeNested(t *testing.T) {
	out := "TAP version 13\n# Subtest: /workspace/solution.test.js\n    # Subtest: add\n    not ok 1 - add\n      ---\n      error: 'not implemented: add'\n      ...\n    1..1\nnot ok 1 - /workspace/solution.test.js\n  ---\n  ...\n1..1\n"
	res := sandbox.Result{Status: sandbox.StatusError, ExitCode: 1, Stdout: []byte(out)}
	if got := nodeOutcome(res); got != testsFailed {
		t.Errorf("outcome %d, want failed", got)
	}
	if got := nodeFailedLine(out); got != "not ok 1 - add: not implemented: add" {
		t.Errorf("failed line %q", got)
	}
}

// TestPythonCoverageInSandbox: the coverage command runs pytest as the
// plain one does (exit status, output), reports the solution's lines the
// tests never ran (not the `if __name__` block), and leaves nothing new in
// the workspace.
func TestPythonCoverageInSandbox(t *testing.T) {
	sb, _ := realParts(t)
	dir := t.TempDir()
	solution := "def sign(x):\n    if x < 0:\n        return -1\n    if x == 0:\n        return 0\n    return 1\n\n\nif __name__ == \"__main__\":\n    print(sign(3))\n"
	tests := "from solution import sign\n\n\ndef test_sign():\n    assert sign(5) == 1\n"
	os.Mkdir(filepath.Join(dir, lang.OwnDir), 0o755)
	os.WriteFile(filepath.Join(dir, ownFile("solution.py")), []byte(solution), 0o644)
	os.WriteFile(filepath.Join(dir, ownFile(TestFileName)), []byte(tests), 0o644)
	marker := newMarker()
	res, err := sb.Run(context.Background(), sandbox.Spec{Command: pythonCoverage(ownFile("solution.py")), Workspace: dir,
		Env: map[string]string{"PYTHONDONTWRITEBYTECODE": "1"}, Stdin: strings.NewReader(marker + "\n")})
	if err != nil {
		t.Fatal(err)
	}
	out, cut, cov := readCoverage(res.Stdout, marker, "")
	if res.Status != sandbox.StatusOK || !strings.Contains(string(out), "1 passed") || strings.Contains(string(out), "@@") {
		t.Fatalf("%s exit %d\nstdout %s\nstderr %s", res.Status, res.ExitCode, res.Stdout, res.Stderr)
	}
	want := &Coverage{Percent: 66.67, Statements: 6, Covered: 4, MissedLines: []int{3, 5}, SelfReported: true}
	if !reflect.DeepEqual(cov, want) || cut != `{"statements": 6, "missing": [3, 5]}` {
		t.Errorf("coverage %+v, want %+v; cut %q", cov, want, cut)
	}
	if got := cov.String(); got != "67% (self-reported; lines 3, 5 not run)" {
		t.Errorf("String() = %q", got)
	}
	entries, _ := os.ReadDir(filepath.Join(dir, lang.OwnDir))
	if top, _ := os.ReadDir(dir); len(entries) != 2 || len(top) != 1 {
		t.Errorf("the workspace holds %d entries and codeagent's directory %d, want it and the 2 files", len(top), len(entries))
	}
}

// TestCoverageUnavailable: where the sandbox has no coverage module (here
// a coverage.py in the workspace that fails to import, as on an image
// without python3-coverage), the tests still decide and the result says
// coverage is unavailable.
func TestCoverageUnavailable(t *testing.T) {
	a, _, ws, _ := setup(t, Config{}, map[string]string{"coverage.py": "raise ImportError('no coverage here')\n"},
		py("def mul(a, b):\n    if a is None:\n        return 0\n    return a * b\n"))
	tests := "from solution import mul\n\n\ndef test_mul():\n    assert mul(3, 4) == 12\n"
	res, err := a.Run(context.Background(), Task{Prompt: "mul(a, b) multiplies", Workspace: ws, TestCode: tests})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Success || res.Coverage == nil || !strings.Contains(res.Coverage.Unavailable, "no coverage module") || strings.Contains(res.Output, "@@") {
		t.Fatalf("success %v, coverage %+v, output %q (%s)", res.Success, res.Coverage, res.Output, res.Message)
	}
}

// TestCoverageWords: the human form of coverage names the missed lines
// with runs as ranges and says it is self-reported; a report after its
// marker leaves what the tests printed around it in place.
func TestCoverageWords(t *testing.T) {
	for _, c := range []struct {
		cov  Coverage
		want string
	}{
		{Coverage{Percent: 90, MissedLines: []int{4}, SelfReported: true}, "90% (self-reported; line 4 not run)"},
		{Coverage{Percent: 50, MissedLines: []int{3, 5, 6, 9}, SelfReported: true}, "50% (self-reported; lines 3, 5-6, 9 not run)"},
		{Coverage{Percent: 100, MissedLines: []int{}, SelfReported: true}, "100% (self-reported)"},
		{Coverage{Unavailable: "no module"}, "unavailable: no module"},
	} {
		if got := c.cov.String(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.cov, got, c.want)
		}
	}
	for p, want := range map[float64]string{100: "100%", 99.7: "99%", 83.3: "83%", 0.2: "1%", 0: "0%"} {
		if got := formatPercent(p); got != want {
			t.Errorf("formatPercent(%g) = %q, want %q", p, got, want)
		}
	}
	out, cut, cov := readCoverage([]byte("1 passed\n"), "@@m@@", "")
	if string(out) != "1 passed\n" || cut != "" || cov.Unavailable == "" {
		t.Errorf("no report: %q, %q, %+v", out, cut, cov)
	}
	out, cut, cov = readCoverage([]byte("1 passed\n@@m@@ {}\n\n@@m@@ {\"statements\": 2, \"missing\": [1]}\natexit\n"), "@@m@@", "")
	if string(out) != "1 passed\n@@m@@ {}\natexit\n" || cut != `{"statements": 2, "missing": [1]}` || cov.Percent != 50 {
		t.Errorf("the last report: %q, %q, %+v", out, cut, cov)
	}
}

// BenchmarkTestsUnderCoverage measures what coverage adds to a test round:
// the same pytest run in the real sandbox, plain and under coverage.py
// (pythonCoverage), interleaved in each op so that both see the same
// machine; reported as ms per run and their ratio.
func BenchmarkTestsUnderCoverage(b *testing.B) {
	sb, _ := realParts(b)
	dir := b.TempDir()
	os.Mkdir(filepath.Join(dir, lang.OwnDir), 0o755)
	os.WriteFile(filepath.Join(dir, ownFile("solution.py")), []byte(runnerCases["python"].right), 0o644)
	os.WriteFile(filepath.Join(dir, ownFile(TestFileName)), []byte(runnerCases["python"].cases[0].tests), 0o644)
	env := map[string]string{"PYTHONDONTWRITEBYTECODE": "1"}
	cov := pythonCoverage(ownFile("solution.py"))
	var plain, covered time.Duration
	for i := 0; i < b.N; i++ {
		for _, c := range []struct {
			cmd   []string
			stdin string
			d     *time.Duration
		}{{testRunners["python"].Command, "", &plain}, {cov, newMarker() + "\n", &covered}} {
			t0 := time.Now()
			res, err := sb.Run(context.Background(), sandbox.Spec{Command: c.cmd, Workspace: dir, Env: env, Stdin: strings.NewReader(c.stdin)})
			*c.d += time.Since(t0)
			if err != nil || res.Status != sandbox.StatusOK {
				b.Fatalf("%v %s %s", err, res.Status, res.Stderr)
			}
		}
	}
	b.ReportMetric(float64(plain.Milliseconds())/float64(b.N), "ms/plain")
	b.ReportMetric(float64(covered.Milliseconds())/float64(b.N), "ms/coverage")
	b.ReportMetric(float64(covered)/float64(plain), "ratio")
}
