package agent

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/codeagent/codeagent/lang"
	"github.com/codeagent/codeagent/sandbox"
)

// signGo is a Go program whose tests below run Sign(5) only: the two early
// returns are never run, and main is not counted.
const signGo = `package main

import "fmt"

func Sign(x int) int {
	if x < 0 {
		return -1
	}
	if x == 0 {
		return 0
	}
	return 1
}

func main() {
	fmt.Println(Sign(3))
}
`

const signGoTests = "package main\n\nimport \"testing\"\n\nfunc TestSign(t *testing.T) {\n\tif Sign(5) != 1 {\n\t\tt.Fatal(\"Sign(5)\")\n\t}\n}\n"

// TestReadGoCoverage: statements are counted from the program, run or not
// by the profile's block that holds their start; braces are no lines of
// their own; func main is left out; the measure is self-reported; what is
// cut (go test's summary, the profile) is returned; a profile missing
// says why.
func TestReadGoCoverage(t *testing.T) {
	const profile = "mode: set\n" +
		"/workspace/solution.go:5.22,6.11 1 1\n/workspace/solution.go:9.2,9.12 1 1\n/workspace/solution.go:12.2,12.10 1 1\n" +
		"/workspace/solution.go:6.11,8.3 1 0\n/workspace/solution.go:9.12,11.3 1 0\n/workspace/solution.go:15.13,17.2 1 0\n"
	out := "ok  \tcommand-line-arguments\t0.003s\tcoverage: 50.0% of statements\n\n@@m@@\n" + profile
	rest, cut, cov := readGoCoverage([]byte(out), "@@m@@", signGo)
	if string(rest) != "ok  \tcommand-line-arguments\t0.003s\n" {
		t.Errorf("rest %q", rest)
	}
	if cut != "\tcoverage: 50.0% of statements\n"+profile {
		t.Errorf("cut %q", cut)
	}
	want := &Coverage{Percent: 60, Statements: 5, Covered: 3, MissedLines: []int{7, 10}, SelfReported: true}
	if !reflect.DeepEqual(cov, want) {
		t.Errorf("coverage %+v, want %+v", cov, want)
	}
	for _, c := range []struct{ out, why string }{
		{"FAIL\n", "no coverage report"},
		{"FAIL\n\n@@m@@\n", "no cover profile"},
	} {
		if _, _, cov := readGoCoverage([]byte(c.out), "@@m@@", signGo); !strings.Contains(cov.Unavailable, c.why) {
			t.Errorf("%q: %+v, want %q", c.out, cov, c.why)
		}
	}
	if _, _, cov := readGoCoverage([]byte(out), "@@m@@", "package main\nfunc {"); !strings.Contains(cov.Unavailable, "did not parse") {
		t.Errorf("unparsable program: %+v", cov)
	}
}

// TestGoCoverageInSandbox: go test under coverage in the real sandbox runs
// the tests as the plain command does and reports the lines never run.
func TestGoCoverageInSandbox(t *testing.T) {
	sb, _ := realParts(t)
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, lang.OwnDir), 0o755)
	os.WriteFile(filepath.Join(dir, ownFile("solution.go")), []byte(signGo), 0o644)
	os.WriteFile(filepath.Join(dir, ownFile(goTestFile)), []byte(signGoTests), 0o644)
	g, err := lang.Lookup("go")
	if err != nil {
		t.Fatal(err)
	}
	marker := newMarker()
	res, err := sb.Run(context.Background(), sandbox.Spec{Command: goCoverage(ownFile("solution.go")), Workspace: dir, Env: g.Environ(false),
		Stdin: strings.NewReader(marker + "\n")})
	if err != nil {
		t.Fatal(err)
	}
	out, _, cov := readGoCoverage(res.Stdout, marker, signGo)
	if res.Status != sandbox.StatusOK || goOutcome(sandbox.Result{Status: res.Status, Stdout: out}) != testsPassed || strings.Contains(string(out), "@@") {
		t.Fatalf("%s exit %d\nstdout %s\nstderr %s", res.Status, res.ExitCode, res.Stdout, res.Stderr)
	}
	if want := (&Coverage{Percent: 60, Statements: 5, Covered: 3, MissedLines: []int{7, 10}, SelfReported: true}); !reflect.DeepEqual(cov, want) {
		t.Errorf("coverage %+v, want %+v\nstdout %s", cov, want, res.Stdout)
	}
	if entries, _ := os.ReadDir(filepath.Join(dir, lang.OwnDir)); len(entries) != 2 {
		t.Errorf("codeagent's directory holds %d entries, want the 2 files", len(entries))
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("the workspace holds %d entries, want codeagent's directory", len(entries))
	}
}

// TestGoTestsRunInTheWorkspace: Go's tests live beside the program in
// codeagent's own directory, yet run, as the program does, in the
// workspace: a test that reads one of the folder's files finds it, plain
// and under coverage.
func TestGoTestsRunInTheWorkspace(t *testing.T) {
	sb, _ := realParts(t)
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, lang.OwnDir), 0o755)
	os.WriteFile(filepath.Join(dir, "data.txt"), []byte("the folder's\n"), 0o644)
	os.WriteFile(filepath.Join(dir, ownFile("solution.go")), []byte("package main\n\nimport \"os\"\n\nfunc Load() string {\n\tb, _ := os.ReadFile(\"data.txt\")\n\treturn string(b)\n}\n\nfunc main() {}\n"), 0o644)
	os.WriteFile(filepath.Join(dir, ownFile(goTestFile)), []byte("package main\n\nimport \"testing\"\n\nfunc TestLoad(t *testing.T) {\n\tif got := Load(); got != \"the folder's\\n\" {\n\t\tt.Errorf(\"Load() = %q\", got)\n\t}\n}\n"), 0o644)
	g, err := lang.Lookup("go")
	if err != nil {
		t.Fatal(err)
	}
	cover := goCoverage(ownFile("solution.go"))
	for _, cmd := range [][]string{goRunner.Command, cover} {
		res, err := sb.Run(context.Background(), sandbox.Spec{Command: cmd, Workspace: dir, Env: g.Environ(false)})
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != sandbox.StatusOK {
			t.Errorf("%s: %s exit %d\nstdout %s\nstderr %s", cmd[:2], res.Status, res.ExitCode, res.Stdout, res.Stderr)
		}
	}
}
