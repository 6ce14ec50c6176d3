package agent

import (
	"strings"

	"github.com/codeagent/codeagent/sandbox"
)

// testOutcome is what one run of the tests says.
type testOutcome int

const (
	testsPassed testOutcome = iota // they ran and all passed
	testsFailed                    // they ran and some failed
	testsNone                      // the runner found no tests
	testsBroken                    // they could not run (syntax, load or collection error, a limit)
)

// String is the outcome's name in events: failed, passed, none, broken.
func (o testOutcome) String() string {
	return [...]string{testsPassed: "passed", testsFailed: "failed", testsNone: "none", testsBroken: "broken"}[o]
}

// testRunner is how test-driven mode writes and runs one language's tests
// (the model's, or the user's --test-file). One entry per language in
// testRunners; a language without one has no test-driven mode.
type testRunner struct {
	Tool    string   // the runner's name for prompts and messages: "pytest"
	File    string   // the test file's name in the workspace
	Command []string // runs File in the workspace
	// Stub is the solution the model's tests must fail against before
	// they are accepted: every name it is asked for exists and every call
	// fails, so tests fail on it exactly when they exercise the solution.
	Stub string
	// StubFails says how the stub fails, for the rejection of vacuous tests.
	StubFails string
	// Guide is how to write the tests (the tests prompt), after "one
	// file, FILE, ".
	Guide string
	// Shape is how the tests load the program and what that asks of it
	// (the task prompt).
	Shape string
	// NoTests says how the runner finds tests, when it found none.
	NoTests string
	// HasTests, when set, tells from the tests' text whether they hold a
	// test at all, for runners whose stub round cannot say (Go's tests do
	// not build on the stub); nil: the run says.
	HasTests func(tests string) bool
	// Outcome reads a run of Command.
	Outcome func(sandbox.Result) testOutcome
	// FailedLine picks the line naming the first failed test from the
	// runner's output, for one-line summaries.
	FailedLine func(stdout string) string
	// Coverage, when set, returns Command measuring which lines of the
	// solution file the tests run; it reads the marker of its report on
	// stdout as the first line of its stdin (see coverage.go); nil:
	// coverage is not measured for the language.
	Coverage func(solution string) []string
	// ReadCoverage takes the report after marker out of a run's stdout
	// and reads it, with the program's text at hand: the rest of stdout,
	// the text it took out, and the coverage.
	ReadCoverage func(stdout []byte, marker, program string) ([]byte, string, *Coverage)
}

// pytestArgs are pytest's arguments (quiet, no cache in the workspace,
// short tracebacks that keep the compared values).
var pytestArgs = []string{"-q", "-p", "no:cacheprovider", "--tb=short", ownFile(TestFileName)}

// nodeTestFile is the JavaScript tests' file: node --test picks it by name.
const nodeTestFile = "solution.test.js"

// testRunners are the languages test-driven mode knows.
var testRunners = map[string]*testRunner{
	"python": {
		Tool: "pytest", File: ownFile(TestFileName),
		Command: append([]string{"python3", "-m", "pytest"}, pytestArgs...),
		Stub:    pythonStub, StubFails: "whose every function raises NotImplementedError",
		Guide: "that imports what it tests from the module solution (for example `from solution import top_products`). " +
			"The program will be solution.py, with its functions at module level and its main work under `if __name__ == \"__main__\":`.\n\n" +
			"- Test return values of functions, on small inline data; use pytest's tmp_path when a function reads a file.\n" +
			"- Every test must fail when the functions are missing or raise NotImplementedError: no test may pass without a working solution.\n" +
			"- Use only pytest and the packages the program may use; no network.",
		Shape:   "They import from the module solution, so define what they use at module level and keep the program's main work under `if __name__ == \"__main__\":`.",
		NoTests: "pytest collected no tests (test functions must be named test_...)",
		Outcome: pytestOutcome, FailedLine: pytestFailedLine, Coverage: pythonCoverage, ReadCoverage: readCoverage,
	},
	"javascript": {
		Tool: "node --test", File: ownFile(nodeTestFile),
		Command: []string{"node", "--test", "--test-reporter=tap", ownFile(nodeTestFile)},
		Stub:    jsStub, StubFails: "whose every export throws \"not implemented\"",
		Guide: "that loads what it tests from the program with require (for example `const { topProducts } = require(\"./solution.js\");`) " +
			"and uses node's built-in test runner: `const test = require(\"node:test\");` and `const assert = require(\"node:assert\");`. " +
			"The program will be solution.js (CommonJS), exporting its functions with `module.exports = { ... }` and doing its main work only under `if (process.argv[1] === __filename)`.\n\n" +
			"- Test return values of functions with assert.strictEqual or assert.deepStrictEqual, on small inline data; call the functions only inside test(...) callbacks, never at the top of the file.\n" +
			"- Every test must fail when the functions are missing or throw: no test may pass without a working solution.\n" +
			"- Use only node's built-in modules; no network.",
		Shape:   "They load the program with `require(\"./solution.js\")`, so export what they use with `module.exports` (CommonJS) and do the program's main work only under `if (process.argv[1] === __filename)`.",
		NoTests: "node --test found no tests in them (call test(\"name\", () => { ... }) from node:test)",
		Outcome: nodeOutcome, FailedLine: nodeFailedLine,
	},
	"go": goRunner,
}

// pythonStub is the Python stub: every name imported from it exists (PEP
// 562 module __getattr__) and every call raises NotImplementedError.
const pythonStub = `# Stub written by codeagent to check that the tests can fail:
# every name exists and every call raises NotImplementedError.
def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)

    def stub(*args, **kwargs):
        raise NotImplementedError(name)

    return stub
`

// jsStub is the JavaScript stub: module.exports is a Proxy whose every
// property is a function that throws (symbols, then and __esModule are
// left undefined, so that the module is not taken for a promise or an ES
// module).
const jsStub = `// Stub written by codeagent to check that the tests can fail:
// every export exists and every call throws "not implemented".
module.exports = new Proxy({}, {
  get(_, name) {
    if (typeof name === "symbol" || name === "then" || name === "__esModule") return undefined;
    return function stub() { throw new Error("not implemented: " + String(name)); };
  },
});
`

// Stub is the Python stub solution (see testRunner.Stub).
const Stub = pythonStub

// pytestOutcome reads pytest's exit status: 1 tests failed, 5 none were
// collected, anything else (2 interrupted by a collection error, 3, 4, a
// limit) could not run them.
func pytestOutcome(res sandbox.Result) testOutcome {
	switch {
	case res.Status == sandbox.StatusOK:
		return testsPassed
	case res.Status == sandbox.StatusError && res.ExitCode == 1:
		return testsFailed
	case res.Status == sandbox.StatusError && res.ExitCode == 5:
		return testsNone
	}
	return testsBroken
}

// pytestFailedLine picks pytest's first "FAILED ..." summary line, else
// the last line.
func pytestFailedLine(out string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "FAILED ") || strings.HasPrefix(l, "ERROR ") {
			return cutRunes(l, 200)
		}
	}
	return lastLine(out)
}

// nodeOutcome reads node --test's TAP output. Node exits with 1 both when
// tests failed and when the file could not be loaded; in the latter case
// (and when it holds no tests) node reports the file itself as the only
// test point, with no test points of the file's own.
func nodeOutcome(res sandbox.Result) testOutcome {
	fileOK, fileFailed, tests := nodeTestPoints(string(res.Stdout))
	switch {
	case res.Status == sandbox.StatusOK && fileOK && tests == 0:
		return testsNone
	case res.Status == sandbox.StatusOK:
		return testsPassed
	case res.Status == sandbox.StatusError && res.ExitCode == 1 && !(fileFailed && tests == 0):
		return testsFailed
	}
	return testsBroken
}

// nodeTestPoints reads TAP test points: whether the test file itself is
// one that passed or failed (node 20 reports it only when it ran no
// tests or failed outside them; node 18 wraps every file's tests in one),
// and how many others there are.
func nodeTestPoints(out string) (fileOK, fileFailed bool, tests int) {
	for _, l := range strings.Split(out, "\n") {
		t := strings.TrimSpace(l)
		var ok bool
		switch {
		case strings.HasPrefix(t, "not ok "):
		case strings.HasPrefix(t, "ok "):
			ok = true
		default:
			continue
		}
		_, name, found := strings.Cut(t, " - ")
		if found && l == t && (name == nodeTestFile || strings.HasSuffix(name, "/"+nodeTestFile)) {
			fileOK, fileFailed = fileOK || ok, fileFailed || !ok
			continue
		}
		tests++
	}
	return fileOK, fileFailed, tests
}

// nodeFailedLine picks node's first failed test point with its error
// ("not ok 1 - add: Expected values to be strictly equal"), else the
// last line.
func nodeFailedLine(out string) string {
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		t := strings.TrimSpace(l)
		if !strings.HasPrefix(t, "not ok ") {
			continue
		}
		for _, e := range lines[i+1 : min(i+12, len(lines))] {
			v, ok := strings.CutPrefix(strings.TrimSpace(e), "error: ")
			if !ok {
				continue
			}
			if v == "|-" { // a block: its first line
				_, after, _ := strings.Cut(strings.Join(lines[i+1:min(i+20, len(lines))], "\n"), "error: |-\n")
				v, _, _ = strings.Cut(strings.TrimSpace(after), "\n")
			}
			return cutRunes(t+": "+strings.Trim(v, "'"), 200)
		}
		return cutRunes(t, 200)
	}
	return lastLine(out)
}
