package agent

import (
	"strings"

	"github.com/codeagent/codeagent/internal/lazyre"
	"github.com/codeagent/codeagent/sandbox"
)

// goTestFile is the Go tests' file: beside solution.go, in package main.
const goTestFile = "solution_test.go"

// goTestFlags are go test's flags: no cache, no vet, and the test binary
// run in the workspace (env -C), where the program's files are.
var goTestFlags = []string{"-count=1", "-vet=off", "-exec=env -C " + sandbox.WorkspacePath}

// goRunner runs Go tests with go test on the two files (no go.mod is
// needed for a file list); vet is off so that only the tests decide. The
// tests run in the working directory, as the program does (go test would
// run them in the files' own directory, codeagent's: see ownFile).
var goRunner = &testRunner{
	Tool: "go test", File: ownFile(goTestFile),
	Command: append(append([]string{"go", "test"}, goTestFlags...), ownFile(SolutionBase+".go"), ownFile(goTestFile)),
	Stub:    goStub, StubFails: "that defines nothing but an empty main, so that tests calling the solution do not even build",
	Guide: "in package main, beside the program, with `import \"testing\"` and test functions `func TestXxx(t *testing.T)` that call the program's functions directly " +
		"(for example `if got := TopProducts(rows, 2); !reflect.DeepEqual(got, want) { t.Errorf(\"TopProducts() = %v, want %v\", got, want) }`). " +
		"The program will be solution.go in package main, with its functions at package level and its main work in func main().\n\n" +
		"- Test return values of functions on small inline data; use t.TempDir() when a function reads a file.\n" +
		"- Every test must call the program's functions: no test may pass without a working solution.\n" +
		"- Use only the standard library; no network.",
	Shape:    "They are in package main beside the program and call its functions, so define what they use at package level (not inside main) and do the program's main work in func main().",
	NoTests:  "go test found no tests in them (functions must be named TestXxx(t *testing.T))",
	HasTests: goHasTests, Outcome: goOutcome, FailedLine: goFailedLine,
	Coverage: goCoverage, ReadCoverage: readGoCoverage,
}

// goTestFunc is the start of a Go test function: func TestXxx(t *testing.T).
var goTestFunc = lazyre.New(`(?m)^func Test[^a-z]\w*\s*\(\s*\w+\s+\*testing\.T\s*\)`)

// goHasTests reports whether Go tests declare a test function.
func goHasTests(tests string) bool { return goTestFunc.MatchString(tests) }

// goStub is the Go stub: a package main with an empty main, so that tests
// that call the solution fail to build ("undefined: Add") exactly when
// they exercise it; Go has no way to make every name exist.
const goStub = `// Stub written by codeagent to check that the tests can fail:
// it defines nothing, so tests that call the solution do not build.
package main

func main() {}
`

// goCompileError is one error of the Go compiler: "./x_test.go:6:12: msg".
var goCompileError = lazyre.New(`(?m)^\S+\.go:\d+:\d+: (.*)$`)

// goOutcome reads go test: "[no tests to run]" with success is none; a
// "--- FAIL" is failed tests; a build that failed only on undefined names
// is failed too (the tests call what the program does not define, as on
// the stub); any other build or setup error could not run them.
func goOutcome(res sandbox.Result) testOutcome {
	out := string(res.Stdout)
	switch {
	case res.Status == sandbox.StatusOK && strings.Contains(out, "[no tests to run]"):
		return testsNone
	case res.Status == sandbox.StatusOK:
		return testsPassed
	case res.Status != sandbox.StatusError:
		return testsBroken
	case strings.Contains(out, "--- FAIL"):
		return testsFailed
	case strings.Contains(out, "[build failed]") && onlyUndefined(string(res.Stderr)):
		return testsFailed
	}
	return testsBroken
}

// onlyUndefined reports whether every compile error in stderr is an
// undefined name (and there is at least one).
func onlyUndefined(stderr string) bool {
	errs := goCompileError.FindAllStringSubmatch(stderr, -1)
	for _, e := range errs {
		if !strings.HasPrefix(e[1], "undefined: ") {
			return false
		}
	}
	return len(errs) > 0
}

// goFailedLine picks go test's first "--- FAIL: TestX" line with the
// message under it, else the last line.
func goFailedLine(out string) string {
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		if !strings.HasPrefix(l, "--- FAIL: ") {
			continue
		}
		if i+1 < len(lines) && strings.HasPrefix(lines[i+1], "    ") {
			return cutRunes(l+": "+strings.TrimSpace(lines[i+1]), 200)
		}
		return cutRunes(l, 200)
	}
	return lastLine(out)
}
