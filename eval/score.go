package eval

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/codeagent/codeagent/agent"
	"github.com/codeagent/codeagent/lang"
	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/workspace"
)

// DefaultScoreTimeout bounds each scoring run of a codeagent-format task
// unless the task or the Scorer says otherwise.
const DefaultScoreTimeout = 30 * time.Second

// HumanEvalLimits are the scoring limits of HumanEval-format tasks, each
// unless the Scorer sets it: the reference harness's 3 s for the sample's
// program (timed, as there, from the start of the program to the return
// of check, the interpreter's start-up apart). The reference limits
// neither memory nor threads; these bounds are far above what a sample
// needs and keep a runaway one from taking the machine.
var HumanEvalLimits = sandbox.Limits{WallTime: 3 * time.Second, Memory: 2 << 30, Processes: 1024}

// harnessGrace is what the sandbox's wall-clock limit adds to a HumanEval
// time limit: the interpreter's start-up and the reference's own second
// of grace before it kills a sample that ignores its alarm.
const harnessGrace = 2 * time.Second

// scoreOutputBudget is how much of a failing test's output (head and tail
// each) is kept in a Score.
const scoreOutputBudget = 2048

// harnessPy runs a HumanEval sample in the sandbox; see its comment.
//
//go:embed harness.py
var harnessPy []byte

// Forms of the code a HumanEval task scored.
const (
	// FormModule: the answer alone, a module binding every top-level name
	// the prompt binds.
	FormModule = "module"
	// FormCompletion: the prompt followed by the answer, as the reference
	// harness builds every program (an answer that is a function body, or
	// leaves out the prompt's helpers or imports).
	FormCompletion = "completion"
)

// Scorer runs a task's hidden tests against code in the sandbox, in a
// fresh workspace each time. The tests are mounted read-only outside the
// workspace, so that the program cannot change them.
type Scorer struct {
	Sandbox sandbox.Sandbox
	// Limits bound each scoring run; a zero field takes the format's
	// default (HumanEvalLimits, or DefaultScoreTimeout and the sandbox's
	// defaults), and a task's own Timeout overrides WallTime. For a
	// HumanEval task WallTime is the program's time limit.
	Limits sandbox.Limits
}

// Score is the verdict of the hidden tests on one piece of code.
type Score struct {
	Passed bool
	// Class is why it failed, as the agent classes failures.
	Class agent.ErrorClass
	// Output is the tests' output when they failed, cut to a budget.
	Output string
	// Form is what a HumanEval task scored: FormModule or FormCompletion.
	Form string
	// CodeSHA256 is the hash of the code scored (the answer, as given).
	CodeSHA256 string
	Wall       time.Duration
}

// Settings returns the limits scoring runs of a format get, before a
// task's own timeout.
func (s *Scorer) Settings(f Format) sandbox.Limits {
	if f == FormatHumanEval {
		return HumanEvalLimits.Overlay(s.Limits).WithDefaults()
	}
	base := sandbox.Limits{WallTime: DefaultScoreTimeout}
	return base.Overlay(s.Limits).WithDefaults()
}

// SettingsLabel describes the limits scoring runs of a format get, for
// reports: "humaneval harness, 3s, memory 2.0GiB, 1024 processes, 1 CPU".
func (s *Scorer) SettingsLabel(f Format) string {
	l := s.Settings(f)
	what := "pytest acceptance test"
	if f == FormatHumanEval {
		what = "humaneval harness"
	}
	return fmt.Sprintf("%s, %s, memory %s, %d processes, %g CPU", what, l.WallTime, sandbox.FormatSize(l.Memory), l.Processes, l.CPUs)
}

// Score runs t's tests against code, exactly as given. The error is
// non-nil only when the sandbox could not run them or ctx ended.
func (s *Scorer) Score(ctx context.Context, t *Task, code string) (Score, error) {
	start := time.Now()
	sum := sha256.Sum256([]byte(code))
	if strings.TrimSpace(code) == "" {
		return Score{Class: agent.ClassNoCode, Output: "there was no code to test", CodeSHA256: hex.EncodeToString(sum[:])}, nil
	}
	ws, err := workspace.New("")
	if err != nil {
		return Score{}, fmt.Errorf("scoring %s: %w", t.ID, err)
	}
	defer ws.Close()
	var sc Score
	switch t.Format {
	case FormatHumanEval:
		sc, err = s.humanEval(ctx, t, ws, code)
	default:
		if err := ws.WriteFile(agent.SolutionBase+".py", []byte(code)); err != nil {
			return Score{}, fmt.Errorf("scoring %s: %w", t.ID, err)
		}
		sc, err = s.acceptance(ctx, t, ws)
	}
	sc.CodeSHA256 = hex.EncodeToString(sum[:])
	sc.Wall = time.Since(start)
	return sc, err
}

// humanEval runs harness.py on the answer in an empty workspace. The
// verdict is the per-run secret on the harness's report: it is handed to
// the harness on standard input, which the harness reads only after check
// has returned, so neither printing a verdict nor exiting early passes.
func (s *Scorer) humanEval(ctx context.Context, t *Task, ws *workspace.Workspace, code string) (Score, error) {
	var raw [16]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return Score{}, fmt.Errorf("scoring %s: %w", t.ID, err)
	}
	secret := "pass-" + hex.EncodeToString(raw[:])
	lim := s.Settings(FormatHumanEval)
	if t.Timeout > 0 {
		lim.WallTime = t.Timeout
	}
	timeout := lim.WallTime
	lim.WallTime += harnessGrace
	lim.CPUTime = lim.WallTime
	py, _ := lang.Lookup("python")
	spec := sandbox.Spec{
		Command:   []string{"python3", "-S", "/code/harness.py", t.EntryPoint, strconv.FormatFloat(timeout.Seconds(), 'f', -1, 64)},
		Workspace: ws.Dir, Env: py.Env, Limits: lim, Stdin: strings.NewReader(secret + "\n"),
		Files: []sandbox.File{{Path: "/code/harness.py", Data: harnessPy}, {Path: "/code/prompt.py", Data: []byte(t.PromptCode)},
			{Path: "/code/answer.py", Data: []byte(code)}, {Path: "/code/test.py", Data: []byte(t.Test)}},
	}
	res, err := s.Sandbox.Run(ctx, spec)
	if err != nil {
		return Score{}, fmt.Errorf("scoring %s: %w", t.ID, err)
	}
	if err := ctx.Err(); err != nil {
		return Score{}, err
	}
	return judge(res, secret), nil
}

// judge reads the harness's report.
func judge(res sandbox.Result, secret string) Score {
	report := strings.ToValidUTF8(string(res.Stdout), "\uFFFD")
	var sc Score
	if first, rest, ok := strings.Cut(report, "\n"); ok && strings.HasPrefix(first, "form ") {
		sc.Form, report = strings.TrimPrefix(first, "form "), rest
	}
	for _, l := range strings.Split(report, "\n") {
		if l == secret {
			sc.Passed = true
			return sc
		}
	}
	report = strings.TrimSpace(report)
	switch {
	case strings.HasPrefix(report, "result: timed out") || res.Status == sandbox.StatusTimeout:
		sc.Class = agent.ClassTimeout
		if report == "" {
			report = fmt.Sprintf("timed out: %s", res.Message)
		}
	case res.Status == sandbox.StatusMemoryLimit:
		sc.Class = agent.ClassMemory
	case res.Status == sandbox.StatusSignaled || res.Status == sandbox.StatusSandboxError:
		sc.Class = agent.ClassOther
	case strings.HasPrefix(report, "result: "):
		sc.Class = agent.Classify(sandbox.Result{Status: sandbox.StatusError}, report)
	default:
		sc.Class = agent.ClassRuntime
		report = "the solution ended the interpreter before check returned"
		if e := strings.TrimSpace(string(res.Stderr)); e != "" {
			report += "\n" + e
		}
	}
	if res.Status != sandbox.StatusOK && res.Status != sandbox.StatusError && res.Message != "" {
		report = res.Message + "\n" + report
	}
	sc.Output = agent.Clip(report, scoreOutputBudget, scoreOutputBudget)
	return sc
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
	lim := s.Settings(t.Format)
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
