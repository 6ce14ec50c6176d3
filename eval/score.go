package eval

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/codeagent/codeagent/agent"
	"github.com/codeagent/codeagent/lang"
	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/workspace"
)

// DefaultScoreTimeout bounds each scoring run unless the task or the
// Scorer says otherwise.
const DefaultScoreTimeout = 30 * time.Second

// scoreOutputBudget is how much of a failing test's output (head and tail
// each) is kept in a Score.
const scoreOutputBudget = 2048

// passedMarker is printed by the HumanEval scoring script after check
// returns, so that a solution that exits early (sys.exit(0) on import)
// does not pass.
const passedMarker = "codeagent-eval: check passed"

// Scorer runs a task's hidden tests against code in the sandbox, in a
// fresh workspace each time. The tests are mounted read-only outside the
// workspace, so that the program cannot change them.
type Scorer struct {
	Sandbox sandbox.Sandbox
	// Limits bound each scoring run; WallTime defaults to
	// DefaultScoreTimeout and a task's own Timeout overrides it.
	Limits sandbox.Limits
}

// Score is the verdict of the hidden tests on one piece of code.
type Score struct {
	Passed bool
	// Class is why it failed, as the agent classes failures.
	Class agent.ErrorClass
	// Output is the tests' output when they failed, cut to a budget.
	Output string
	Wall   time.Duration
}

// Score runs t's tests against code. The error is non-nil only when the
// sandbox could not run them or ctx ended.
func (s *Scorer) Score(ctx context.Context, t *Task, code string) (Score, error) {
	start := time.Now()
	if strings.TrimSpace(code) == "" {
		return Score{Class: agent.ClassNoCode, Output: "there was no code to test"}, nil
	}
	ws, err := workspace.New("")
	if err != nil {
		return Score{}, fmt.Errorf("scoring %s: %w", t.ID, err)
	}
	defer ws.Close()
	if err := ws.WriteFile(agent.SolutionBase+".py", []byte(code)); err != nil {
		return Score{}, fmt.Errorf("scoring %s: %w", t.ID, err)
	}
	var sc Score
	switch t.Format {
	case FormatHumanEval:
		sc, err = s.humanEval(ctx, t, ws)
	default:
		sc, err = s.acceptance(ctx, t, ws)
	}
	sc.Wall = time.Since(start)
	return sc, err
}

// humanEval runs the solution module, the task's test code and
// check(entry_point) in one interpreter, as HumanEval's harness does; the
// solution's names are visible to the test (some tests use its helpers).
func (s *Scorer) humanEval(ctx context.Context, t *Task, ws *workspace.Workspace) (Score, error) {
	script := fmt.Sprintf(`import sys
sys.path.insert(0, %q)
import solution as _codeagent_solution
globals().update({k: v for k, v in vars(_codeagent_solution).items() if not k.startswith("__")})

%s

check(%s)
print(%q)
`, sandbox.WorkspacePath, t.Test, t.EntryPoint, passedMarker)
	res, err := s.run(ctx, t, ws, []string{"python3", "/code/score.py"}, []sandbox.File{{Path: "/code/score.py", Data: []byte(script)}})
	if err != nil {
		return Score{}, err
	}
	if res.Status == sandbox.StatusOK && strings.HasSuffix(strings.TrimRight(string(res.Stdout), "\n"), passedMarker) {
		return Score{Passed: true}, nil
	}
	sc := Score{Class: agent.Classify(res, string(res.Stderr)), Output: output(res)}
	if sc.Class == agent.ClassNone {
		sc.Class, sc.Output = agent.ClassRuntime, "the solution ended the interpreter before check ran\n"+sc.Output
	}
	return sc, nil
}

// acceptance writes the inputs, runs the program, then runs the pytest
// acceptance test in the workspace the program left.
func (s *Scorer) acceptance(ctx context.Context, t *Task, ws *workspace.Workspace) (Score, error) {
	for _, f := range t.Files {
		if err := ws.WriteFile(f.Name, f.Data); err != nil {
			return Score{}, fmt.Errorf("scoring %s: %w", t.ID, err)
		}
	}
	py, _ := lang.Lookup("python")
	res, err := s.run(ctx, t, ws, py.Command(sandbox.WorkspacePath+"/"+agent.SolutionBase+".py"), nil)
	if err != nil {
		return Score{}, err
	}
	if res.Status != sandbox.StatusOK {
		return Score{Class: agent.Classify(res, string(res.Stderr)),
			Output: fmt.Sprintf("the program failed (%s, exit status %d):\n%s", res.Status, res.ExitStatus(), output(res))}, nil
	}
	cmd := []string{"python3", "-m", "pytest", "-q", "-p", "no:cacheprovider", "--tb=short", "/code/test_acceptance.py"}
	res, err = s.run(ctx, t, ws, cmd, []sandbox.File{{Path: "/code/test_acceptance.py", Data: []byte(t.Test)}})
	if err != nil {
		return Score{}, err
	}
	if res.Status == sandbox.StatusOK {
		return Score{Passed: true}, nil
	}
	class := agent.Classify(res, string(res.Stdout)+"\n"+string(res.Stderr))
	if class == agent.ClassRuntime && res.Status == sandbox.StatusError && res.ExitCode == 1 {
		class = agent.ClassAssertion
	}
	return Score{Class: class, Output: output(res)}, nil
}

// run executes cmd in ws with the python environment and the limits.
func (s *Scorer) run(ctx context.Context, t *Task, ws *workspace.Workspace, cmd []string, files []sandbox.File) (sandbox.Result, error) {
	py, _ := lang.Lookup("python")
	lim := s.Limits
	if lim.WallTime == 0 {
		lim.WallTime = DefaultScoreTimeout
	}
	if t.Timeout > 0 {
		lim.WallTime = t.Timeout
	}
	res, err := s.Sandbox.Run(ctx, sandbox.Spec{Command: cmd, Workspace: ws.Dir, Files: files, Env: py.Env, Limits: lim})
	if err != nil {
		return res, fmt.Errorf("scoring %s: %w", t.ID, err)
	}
	if err := ctx.Err(); err != nil {
		return res, err
	}
	return res, nil
}

// output is a failed run's stdout and stderr, cut to the budget.
func output(res sandbox.Result) string {
	s := strings.TrimSpace(string(res.Stdout))
	if e := strings.TrimSpace(string(res.Stderr)); e != "" {
		if s != "" {
			s += "\n"
		}
		s += e
	}
	if res.Status != sandbox.StatusOK && res.Status != sandbox.StatusError && res.Message != "" {
		s = res.Message + "\n" + s
	}
	return agent.Clip(strings.ToValidUTF8(s, "\uFFFD"), scoreOutputBudget, scoreOutputBudget)
}
