package app

import (
	"errors"
	"github.com/codeagent/codeagent/agent"
	"strings"
	"testing"
	"time"

	"github.com/codeagent/codeagent/sandbox"
)

// TestRunRequestValidate: the rules of a run, one message each, of class
// Invalid; what every door's defaults leave (zeros) passes.
func TestRunRequestValidate(t *testing.T) {
	ok := RunRequest{Task: "sum the units"}
	if err := ok.Validate(); err != nil {
		t.Fatalf("a plain run refused: %v", err)
	}
	full := RunRequest{Task: "t", TestCode: "def test(): pass\n", Config: agent.Config{MaxIterations: agent.MaxIterationsCeiling,
		MaxSteps: agent.MaxStepsCeiling, Mode: agent.ModeAuto, Lang: "py", Network: &sandbox.Network{}, Approve: agent.ApproveOnFinding}}
	if err := full.Validate(); err != nil {
		t.Fatalf("a run at the ceilings refused: %v", err)
	}
	with := func(f func(*RunRequest)) RunRequest { r := ok; f(&r); return r }
	for _, c := range []struct {
		req  RunRequest
		want string
	}{
		{with(func(r *RunRequest) { r.Task = " \n" }), "a task is required"},
		{with(func(r *RunRequest) { r.Task = strings.Repeat("x", MaxTaskLen+1) }), "the task is longer than 65536 bytes"},
		{with(func(r *RunRequest) { r.Config.MaxIterations = agent.MaxIterationsCeiling + 1 }), "max_iterations 101: want 1 to 100"},
		{with(func(r *RunRequest) { r.Config.MaxIterations = -1 }), "max_iterations -1: want 1 to 100"},
		{with(func(r *RunRequest) { r.Config.MaxSteps = agent.MaxStepsCeiling + 1 }), "max_steps 201: want 1 to 200"},
		{with(func(r *RunRequest) { r.Config.Mode = "tool" }), `mode "tool": want program, tools or auto`},
		{with(func(r *RunRequest) { r.Config.Approve = "sometimes" }), `approve "sometimes": want always or on-finding`},
		{with(func(r *RunRequest) { r.Config.Lang = "cobol" }), `unknown language "cobol"`},
		{with(func(r *RunRequest) { r.Config.Lang, r.TestCode = "bash", "x" }), "tests need go, javascript or python, not bash"},
		{with(func(r *RunRequest) { r.Config.Lang, r.Config.Tests = "bash", true }), "test-driven mode needs go, javascript or python, not bash"},
		{with(func(r *RunRequest) { r.Config.Mode, r.Config.Tests = agent.ModeTools, true }), "mode tools takes no tests"},
		{with(func(r *RunRequest) { r.Config.Mode, r.Config.Network = agent.ModeTools, &sandbox.Network{} }), "mode tools runs Python in a kernel without network"},
	} {
		err := c.req.Validate()
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q of class Invalid", c.want, err, c.want)
		}
	}
}

// TestCellRequestValidate: a kept kernel's cell is Python code with at
// most a timeout; the rest a kernel fixes when it starts is refused.
func TestCellRequestValidate(t *testing.T) {
	ok := CellRequest{Language: "python3", Code: "x = 1", Limits: sandbox.Limits{WallTime: 5 * time.Second}}
	if err := ok.Validate(); err != nil {
		t.Fatalf("a plain cell refused: %v", err)
	}
	with := func(f func(*CellRequest)) CellRequest { c := ok; f(&c); return c }
	for _, c := range []struct {
		req  CellRequest
		want string
	}{
		{with(func(c *CellRequest) { c.Language = "bash" }), "keep state runs Python only"},
		{with(func(c *CellRequest) { c.Language = "cobol" }), `unknown language "cobol"`},
		{with(func(c *CellRequest) { c.Code = "  " }), "the cell is empty"},
		{with(func(c *CellRequest) { c.Stdin = strings.Repeat("x", 16<<20+1) }), "limited to 16 MiB each"},
		{with(func(c *CellRequest) { c.Limits.WallTime = time.Millisecond }), "limits.timeout: 1ms is below the least a program can start with, 10ms"},
		{with(func(c *CellRequest) { c.Limits.Memory = 1 << 30 }), "with keep state only the timeout applies"},
		{with(func(c *CellRequest) { c.Env = map[string]string{"A": "b"} }), "keep state takes no environment"},
		{with(func(c *CellRequest) { c.AllowHosts = []string{"example.com"} }), "keep state has no network"},
		{with(func(c *CellRequest) { c.Dependencies = &DependenciesRequest{Python: []string{"tern"}} }), "keep state takes no dependencies"},
	} {
		err := c.req.Validate()
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q of class Invalid", c.want, err, c.want)
		}
	}
}

// TestCheckFileName: one message for a refused file name, at every door.
func TestCheckFileName(t *testing.T) {
	for _, name := range []string{"data.csv", "report 2024+final.txt", "_x"} {
		if err := CheckFileName(name); err != nil {
			t.Errorf("%q refused: %v", name, err)
		}
	}
	for _, name := range []string{"../x", "a/b", ".env", "-rf", strings.Repeat("a", 201)} {
		err := CheckFileName(name)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "a plain name of at most 200 letters") {
			t.Errorf("%q: %v", name, err)
		}
	}
}
