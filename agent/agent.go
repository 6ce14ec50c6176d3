// Package agent turns a task in plain language into working code: it asks a
// model for a program, checks it statically, runs it in the sandbox,
// verifies the output with the model and feeds every failure back until the
// task is done or the attempt budget is spent.
//
// In tool mode the model works through function calls instead: execute_*
// tools (execute_python in a stateful kernel) and the workspace's files,
// each call checked against the offered tools and statically before it
// runs; when the model ends, the cells that succeeded are assembled into
// the program and replayed in a fresh sandbox, which must reproduce what
// the verifier accepted.
//
// The package is a library; `codeagent run` is a thin front end. An Agent is
// built from a Config and its dependencies (model, sandbox, checker, logger,
// observer) and holds no global state. Everything shown to the model or
// returned to the caller passes through a Redactor, and long outputs are
// cut to a budget (head and tail) before they reach the model.
package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"

	"github.com/codeagent/codeagent/kernel"
	"github.com/codeagent/codeagent/lang"
	"github.com/codeagent/codeagent/llm"
	"github.com/codeagent/codeagent/safety"
	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/workspace"
)

// Defaults of Config.
const (
	DefaultMaxIterations   = 5
	DefaultFreshStartAfter = 3
	DefaultMaxTestRounds   = 3
	DefaultMaxSteps        = 20
	// MaxIterationsCeiling is the most attempts one run may be given, at
	// every door (CLI, HTTP, MCP, the manifest).
	MaxIterationsCeiling = 100
	// MaxStepsCeiling is the most tool calls one run in tool mode may be
	// given, at every door.
	MaxStepsCeiling = 200
)

// Modes of Config.Mode.
const (
	ModeProgram = "program" // whole programs in fenced code blocks
	ModeTools   = "tools"   // tool calls: execute_*, list_files, read_file, write_file
	ModeAuto    = "auto"    // tools when the endpoint takes them, programs otherwise
)

// File names the agent writes in the workspace, in codeagent's own
// directory (lang.OwnDir, see ownFile).
const (
	SolutionBase = "solution"         // + the language's extension
	TestFileName = "test_solution.py" // Python's tests in test-driven mode (see Agent.TestFile)
)

// ownFile is the workspace's path of the agent's file name: in codeagent's
// own directory, which listings, artifacts and a folder's changes leave
// out, so that the program and its tests never take, nor offer to replace,
// a file of the user's folder (their own solution.py). The program still
// runs with the workspace as its working directory.
func ownFile(name string) string { return lang.OwnDir + "/" + name }

// Config is how an Agent works. Zero fields take the defaults.
type Config struct {
	// MaxIterations is the attempt budget for the program (default 5).
	MaxIterations int
	// FreshStartAfter is how many failed repairs in a row make the next
	// attempt start again from the task, with a short summary of what
	// failed instead of the whole conversation (default 3; negative: never).
	FreshStartAfter int
	// Verify asks the model, after each successful run, whether the output
	// completes the task. Not used when tests decide success.
	Verify bool
	// Lang is the program's language: python (default), javascript, bash or go.
	Lang string
	// Limits bound each execution; zero fields take the sandbox defaults.
	Limits sandbox.Limits
	// Env is added to the sandbox environment.
	Env map[string]string
	// Network lets programs reach the hosts it allows (nil: no network);
	// a refused host is named in the feedback to the model.
	Network *sandbox.Network
	// Installed names the packages installed for the run besides the
	// image's ("seaborn 0.13.2"), for the prompt (see package deps).
	Installed []string
	// Tests turns on test-driven mode (python with pytest, javascript with
	// node --test: see testRunners): the model writes tests first, they
	// must fail against a stub, then the program is iterated until they
	// pass, then run itself.
	Tests bool
	// MaxTestRounds bounds the tries to get usable tests (default 3).
	MaxTestRounds int
	// OutputBudget is how many bytes of the head and of the tail of each
	// output stream reach the model (default 4096 each).
	OutputBudget int
	// Secrets are values (API keys) redacted from everything shown to the
	// model or returned; common key patterns are redacted in any case.
	Secrets []string
	// Model, MaxTokens and Temperature are passed on in each request when
	// set; otherwise the provider's configuration decides.
	Model       string
	MaxTokens   int
	Temperature *float64
	// Artifacts bound the listing of created files.
	Artifacts workspace.Limits
	// Mode is ModeProgram (the default), ModeTools or ModeAuto: tools when
	// the endpoint accepts tool definitions and the model calls them in
	// its first answer, programs otherwise, for the rest of the run. Auto
	// takes program mode for test-driven runs, tests and a network, which
	// tool mode does not do.
	Mode string
	// MaxSteps bounds the tool calls of a run in tool mode (default 20);
	// MaxIterations then bounds its verification rounds.
	MaxSteps int
	// Tools are the execute tools offered in tool mode (execute_python,
	// execute_javascript, execute_bash, as a manifest lists them) with the
	// limits of each (zero fields: Limits'); nil offers all three with
	// Limits. The language's own tool must be among them.
	Tools map[string]sandbox.Limits
	// Approve is ApproveOff (the default), ApproveAlways or
	// ApproveOnFinding: when a person (Deps.Approver) is asked before an
	// execution. See gate in approve.go.
	Approve string
	// ReviewModel is the model Deps.Reviewer is asked with (empty: the
	// reviewer provider's own).
	ReviewModel string
	// NoTrace turns off execution traces: by default a Python program
	// that fails with an uncaught exception reports the values its last
	// frames held (see lang.TracedCommand), for the repair request.
	NoTrace bool
}

// Deps are what an Agent works with. Provider, Sandbox and Checker are
// required; Logger and Observer may be nil.
type Deps struct {
	Provider llm.Provider
	Sandbox  sandbox.Sandbox
	Checker  *safety.Checker
	Logger   *slog.Logger
	Observer Observer
	// Installer, when set, lets a Python program declare packages to
	// install (see install.go); nil: the model is told nothing can be
	// installed.
	Installer Installer
	// Approver, when set, is asked before executions as Config.Approve
	// says; required when it is on.
	Approver Approver
	// Reviewer, when set, is a second model asked before each execution
	// whether the code does what the task asks and nothing else; a
	// rejection goes back to the model (or, when approving, to the person).
	Reviewer llm.Provider
	// MayGrantHost, when set, refuses hosts no approval may grant (a
	// server's egress ceiling); nil: a person may grant any host.
	MayGrantHost func(rule string) error
	// GrantBase, when set, is where a granted network starts from in a
	// run that has none (the door's byte budget and name overrides).
	GrantBase *sandbox.Network
}

// Agent runs tasks. It is safe for concurrent use when its dependencies
// are; each Run needs its own workspace.
type Agent struct {
	cfg      Config
	deps     Deps
	lang     lang.Language
	safeLang safety.Language
	tests    *testRunner // nil: the language has no test-driven mode
	log      *slog.Logger
	redact   *Redactor
}

// ErrConfig is wrapped by errors about an unusable Config or Deps.
var ErrConfig = errors.New("agent: invalid configuration")

// New validates cfg and deps and returns an Agent.
func New(cfg Config, deps Deps) (*Agent, error) {
	if deps.Provider == nil || deps.Sandbox == nil || deps.Checker == nil {
		return nil, fmt.Errorf("%w: a provider, a sandbox and a checker are required", ErrConfig)
	}
	if cfg.MaxIterations == 0 {
		cfg.MaxIterations = DefaultMaxIterations
	}
	if cfg.MaxIterations < 0 || cfg.MaxIterations > MaxIterationsCeiling {
		return nil, fmt.Errorf("%w: max iterations %d is not between 1 and %d", ErrConfig, cfg.MaxIterations, MaxIterationsCeiling)
	}
	if cfg.FreshStartAfter == 0 {
		cfg.FreshStartAfter = DefaultFreshStartAfter
	}
	if cfg.MaxTestRounds <= 0 {
		cfg.MaxTestRounds = DefaultMaxTestRounds
	}
	if cfg.OutputBudget <= 0 {
		cfg.OutputBudget = DefaultOutputBudget
	}
	if cfg.Lang == "" {
		cfg.Lang = "python"
	}
	l, err := lang.Lookup(cfg.Lang)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	sl, err := safety.ParseLanguage(l.Name)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	tests := testRunners[l.Name]
	if cfg.Tests && tests == nil {
		return nil, fmt.Errorf("%w: test-driven mode needs %s, not %s", ErrConfig, TestLanguages(), l.Name)
	}
	if !ValidApprove(cfg.Approve) {
		return nil, fmt.Errorf("%w: approve %q is not one of always, on-finding", ErrConfig, cfg.Approve)
	}
	if cfg.Approve != ApproveOff && deps.Approver == nil {
		return nil, fmt.Errorf("%w: approving executions needs an approver", ErrConfig)
	}
	if err := cfg.validateTools(l.Name); err != nil {
		return nil, err
	}
	log := deps.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Agent{cfg: cfg, deps: deps, lang: l, safeLang: sl, tests: tests, log: log, redact: NewRedactor(cfg.Secrets...)}, nil
}

// Task is one job for the agent.
type Task struct {
	// Prompt is the task in plain language.
	Prompt string
	// Workspace is where the program runs; inputs are already in it.
	Workspace *workspace.Workspace
	// TestCode, when set, are the user's tests for the language's runner
	// (pytest, node --test): they are written as Agent.TestFile, load the
	// solution, and success means they pass.
	TestCode string
	// History summarises the earlier turns of a session (tasks, final code,
	// outputs, files), so that a task can build on them.
	History string
	// Accept, when set, is the caller's acceptance check (hidden tests in
	// an evaluation). It runs on each attempt's code after the program ran
	// successfully (or the user's tests passed), before the verifier; a
	// rejection goes back to the model like a failed run, with what the
	// check reported. The model never sees the check itself. An error ends
	// the run.
	Accept func(ctx context.Context, code string) (Acceptance, error)
	// NewKernel starts tool mode's kernel for opts, in which execute_python
	// cells run with their state kept (a session's, whose cells are
	// audited: see package session); nil starts kernel.NewSession(opts).
	// The run closes the kernel when it ends.
	NewKernel func(opts kernel.Options) kernel.Interpreter
}

// Acceptance is the outcome of Task.Accept.
type Acceptance struct {
	Passed bool `json:"passed"`
	// Output is what the check reported, e.g. a failing test's traceback;
	// the model sees it when the check fails.
	Output string `json:"output,omitempty"`
	// Class of a failure; assertion when empty.
	Class ErrorClass `json:"error_class,omitempty"`
}

// Result is the outcome of a run. It is returned also with an error, as
// far as the run got.
type Result struct {
	Success bool `json:"success"`
	// Mode is how the run worked: program or tools.
	Mode string `json:"mode"`
	// Language is what the programs were written in: python, javascript
	// or bash.
	Language string `json:"language"`
	Attempts int    `json:"attempts"`
	// Code is the final program as shown: secrets redacted.
	Code string `json:"code"`
	// Source is the final program exactly as it was extracted and run,
	// for a caller that runs it again (an evaluation's scorer); it is never
	// serialised, shown or logged, since it may hold secrets.
	Source string `json:"-"`
	// Output is the program's stdout in the last run.
	Output    string               `json:"output"`
	Artifacts []workspace.Artifact `json:"artifacts"`
	// Skipped are workspace entries left out of the artifacts.
	Skipped []workspace.Skipped `json:"skipped,omitempty"`
	Usage   Usage               `json:"usage"`
	History []Attempt           `json:"history"`
	// Tests are the tests that decided success (test-driven mode).
	Tests      string    `json:"tests,omitempty"`
	TestRounds []Attempt `json:"test_rounds,omitempty"`
	// Coverage is the line coverage of the last attempt's program by the
	// tests, when they passed on it (python).
	Coverage *Coverage `json:"coverage,omitempty"`
	// Message says why the run failed, when it did.
	Message string `json:"message,omitempty"`
	// Stopped says a person stopped the run at an approval.
	Stopped bool `json:"stopped,omitempty"`
}

// Attempt is one round of the loop.
type Attempt struct {
	N          int  `json:"attempt"`
	FreshStart bool `json:"fresh_start,omitempty"`
	// Code is the attempt's program as shown: secrets redacted.
	Code string `json:"code"`
	// Source is the program exactly as extracted and run; see Result.Source.
	Source string `json:"-"`
	// Check is what the static checker found, then its lint warnings
	// (Kind "lint"), which never stop a program.
	Check      []safety.Finding    `json:"check"`
	TestResult *sandbox.ResultJSON `json:"test_result,omitempty"`
	Coverage   *Coverage           `json:"coverage,omitempty"`
	Result     *sandbox.ResultJSON `json:"result,omitempty"`
	// Cut is what was taken out of the output of TestResult (a coverage
	// report) and Result (an execution trace) before they were recorded.
	Cut        []Cut      `json:"cut,omitempty"`
	ErrorClass ErrorClass `json:"error_class,omitempty"`
	Verdict    *Verdict   `json:"verdict,omitempty"`
	// Acceptance is the outcome of Task.Accept, when it ran.
	Acceptance *Acceptance `json:"acceptance,omitempty"`
	// Steps are the tool calls of a verification round (tool mode), and
	// Replay the assembled program's run in a fresh sandbox; Code is
	// that program.
	Steps  []Step              `json:"steps,omitempty"`
	Replay *sandbox.ResultJSON `json:"replay,omitempty"`
}

// Verdict is the verifier's judgement of a successful run.
type Verdict struct {
	TaskComplete bool   `json:"task_complete"`
	Missing      string `json:"missing"`
	// Note says when the verifier's answer could not be read: asked twice
	// without a verdict, the run counts as not complete.
	Note string `json:"note,omitempty"`
}

// Usage counts the model's tokens over a run.
type Usage struct {
	Requests     int   `json:"requests"`
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
	TotalTokens  int64 `json:"total_tokens"`
}

func (u *Usage) add(v llm.Usage) {
	u.Requests++
	u.InputTokens += v.InputTokens
	u.OutputTokens += v.OutputTokens
	u.TotalTokens = u.InputTokens + u.OutputTokens
}

// SolutionFile is the program's path in the workspace:
// .codeagent/solution.py (see ownFile).
func (a *Agent) SolutionFile() string { return ownFile(SolutionBase + a.lang.Ext) }

// TestFile is the tests' path in the workspace, beside the program:
// .codeagent/test_solution.py, .codeagent/solution.test.js.
func (a *Agent) TestFile() string {
	if a.tests == nil {
		return ownFile(TestFileName)
	}
	return a.tests.File
}

// HasTests reports whether language (a canonical name) has test-driven
// mode and takes a caller's tests.
func HasTests(language string) bool { return testRunners[language] != nil }

// TestLanguages names the languages of test-driven mode, for messages:
// "go, javascript or python".
func TestLanguages() string { return lang.JoinOr(testLanguages()) }

// testLanguages are the languages of test-driven mode, sorted.
func testLanguages() []string {
	names := make([]string, 0, len(testRunners))
	for n := range testRunners {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Redactor returns the agent's redactor, for callers that show other text.
func (a *Agent) Redactor() *Redactor { return a.redact }
