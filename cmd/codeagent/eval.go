package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/codeagent/codeagent/agent"
	"github.com/codeagent/codeagent/app"
	"github.com/codeagent/codeagent/eval"
	"github.com/codeagent/codeagent/eval/suites/dataanalysis"
	"github.com/codeagent/codeagent/llm"
	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/sandbox/backends"
	"github.com/codeagent/codeagent/termtext"
)

// evalOptions are the inputs of `codeagent eval`.
type evalOptions struct {
	Tasks         string
	Limit         int
	Only          string
	Feedback      string
	MaxIterations int
	Concurrency   int
	Results       string
	Report        string
	JSON          bool
	Compare       string
	Samples       int
	Ks            string
	SamplesFile   string
	Progress      bool
	Temperature   string
	NoTrace       bool
	Limits        sandbox.Limits
	ScoreTimeout  time.Duration
	TaskTimeout   time.Duration
	Backend       string
	AllowWeak     bool
	Backends      *backendFlags // --image and the kubernetes backend's settings
	Provider      *providerFlags
	Getenv        func(string) string
}

// builtinPrefix names a suite compiled into the binary.
const builtinPrefix = "builtin:"

func cmdEval(ctx context.Context, s stdio, args []string) int {
	fs := newFlagSet("eval", s)
	fs.Usage = func() {
		fmt.Fprintln(s.err, "usage: codeagent eval --tasks FILE [flags]\n       codeagent eval --tasks FILE --samples-file SAMPLES.jsonl [flags]\n"+
			"       codeagent eval --compare A.jsonl,B.jsonl [--json]\n\n"+
			"Measure the agent on a benchmark suite: HumanEval JSONL, or codeagent's format (task, input files,\n"+
			"a pytest acceptance test), e.g. builtin:dataanalysis. Prints pass rates at attempt 1..K of the\n"+
			"agent's loop and final, the unbiased pass@k over --samples independent runs a task, attempts,\n"+
			"error classes, tokens, time and the scoring settings. With --samples-file, scores completions\n"+
			"({task_id, completion} lines, the reference harness's input) without a model. With --results,\n"+
			"each sample's outcome is appended as it finishes, and a later run with the same file resumes\n"+
			"where this one stopped (or adds samples, with a larger --samples). See docs/EVAL.md.\n"+
			"Exit status: 0 when the tasks were run and scored (whatever they scored), 2 for usage errors,\n"+
			"3 when the model provider failed, 125 when the sandbox could not be set up, 130 on Ctrl-C\n"+
			"(143 on SIGTERM), 1 otherwise.\n\nflags:")
		printFlags(fs)
	}
	o := evalOptions{Getenv: os.Getenv}
	o.Provider = addProviderFlags(fs)
	fs.StringVar(&o.Tasks, "tasks", "", "task file (JSONL), or "+builtinPrefix+dataanalysis.Name)
	fs.IntVar(&o.Limit, "limit", 0, "evaluate only the first N tasks")
	fs.StringVar(&o.Only, "only", "", "run these task ids again (comma-separated), even when they have results")
	fs.StringVar(&o.Feedback, "feedback", "none", "none (one attempt), tests (hidden tests' failures go back), self (its tests) (default none)")
	fs.IntVar(&o.MaxIterations, "max-iterations", eval.DefaultMaxIterations, "attempts per task with --feedback tests or self")
	fs.IntVar(&o.Concurrency, "concurrency", 2, "tasks run at once")
	fs.StringVar(&o.Results, "results", "", "append each task's outcome to this JSONL file, and skip tasks it already holds")
	fs.StringVar(&o.Report, "report", "", "also write the report to this file (.json for JSON, Markdown otherwise)")
	fs.BoolVar(&o.JSON, "json", false, "print the summary as JSON instead of a Markdown table")
	fs.StringVar(&o.Compare, "compare", "", "compare results files (comma-separated) instead of running")
	fs.IntVar(&o.Samples, "samples", 1, "independent agent runs per task, each with its own budget, for pass@k")
	fs.StringVar(&o.Ks, "k", "", "pass@k for these k (comma-separated, e.g. 1,10,100; default 1, and 5 with 5 or more samples)")
	fs.StringVar(&o.SamplesFile, "samples-file", "", "score this JSONL file's completions ({task_id, completion} a line), asking no model")
	fs.BoolVar(&o.Progress, "progress", false, "show the progress bar even when stderr is not a terminal")
	fs.StringVar(&o.Temperature, "temperature", "", "sampling temperature sent to the model (default: the model's)")
	fs.BoolVar(&o.NoTrace, "no-trace", false, "do not show the model the values a failing program's last frames held")
	durationVar(fs, &o.Limits.WallTime, "timeout", 0, boundProgramTime, "wall-clock limit of each program run by the agent (default 30s)")
	sizeVar(fs, &o.Limits.Memory, "memory", boundMemory, "memory limit of each program run (default 256MiB; 2GiB when scoring HumanEval tasks)")
	durationVar(fs, &o.ScoreTimeout, "score-timeout", 0, boundProgramTime, "time limit of each hidden tests' run (default 3s for HumanEval, 30s for codeagent tasks)")
	durationVar(fs, &o.TaskTimeout, "task-timeout", 15*time.Minute, boundTaskTime, "time limit of one task's agent run (0: none)")
	o.Backends = addSandboxFlags(fs, &o.Backend, &o.AllowWeak)
	if code, done := parseNoArgs(fs, args, s); done {
		return code
	}
	if o.Compare != "" {
		return exitCodeFor(s.err, evalCompare(o, s))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	cfg, err := o.config(set)
	if err != nil {
		return exitCodeFor(s.err, err)
	}
	err = runEval(ctx, o, cfg, s)
	var stopped evalStopped
	detail := ""
	if errors.As(err, &stopped) {
		detail = stopped.detail()
	}
	if code, ok := exitInterrupted(ctx, s.err, detail); ok {
		return code
	}
	return exitCodeFor(s.err, err)
}

// config validates the flags and builds the runner's configuration.
func (o *evalOptions) config(set map[string]bool) (eval.Config, error) {
	mode, err := eval.ParseMode(o.Feedback)
	switch {
	case o.Tasks == "":
		return eval.Config{}, usagef("--tasks FILE is required (or --compare)")
	case err != nil:
		return eval.Config{}, usageError{err}
	case o.MaxIterations < 1 || o.MaxIterations > 100:
		return eval.Config{}, usagef("--max-iterations %d: want 1 to 100", o.MaxIterations)
	case mode == eval.ModeNone && set["max-iterations"] && o.MaxIterations != 1:
		return eval.Config{}, usagef("--feedback none makes one attempt; use --feedback tests or self for --max-iterations %d", o.MaxIterations)
	case o.Concurrency < 1 || o.Concurrency > 64:
		return eval.Config{}, usagef("--concurrency %d: want 1 to 64", o.Concurrency)
	case o.Limit < 0:
		return eval.Config{}, usagef("--limit must not be negative")
	case o.Samples < 1 || o.Samples > 10000:
		return eval.Config{}, usagef("--samples %d: want 1 to 10000", o.Samples)
	case o.SamplesFile != "" && (set["samples"] || set["feedback"] || set["max-iterations"]):
		return eval.Config{}, usagef("--samples-file scores the file's completions: it takes no --samples, --feedback or --max-iterations")
	}
	if _, err := o.ks(); err != nil {
		return eval.Config{}, err
	}
	cfg := eval.Config{Mode: mode, MaxIterations: o.MaxIterations, Concurrency: o.Concurrency, TaskTimeout: o.TaskTimeout,
		Agent: agent.Config{Limits: o.Limits, NoTrace: o.NoTrace}, Score: sandbox.Limits{WallTime: o.ScoreTimeout, Memory: o.Limits.Memory}}
	if o.Temperature != "" {
		t, err := strconv.ParseFloat(o.Temperature, 64)
		if err != nil || t < 0 || t > 2 {
			return cfg, usagef("--temperature %q: want a number from 0 to 2", o.Temperature)
		}
		cfg.Agent.Temperature = &t
	}
	return cfg, nil
}

// ks reads --k; nil means the default.
func (o *evalOptions) ks() ([]int, error) {
	var out []int
	for _, f := range strings.Split(o.Ks, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		k, err := strconv.Atoi(f)
		if err != nil || k < 1 {
			return nil, usagef("--k %q: want positive whole numbers such as 1,10,100", o.Ks)
		}
		out = append(out, k)
	}
	return out, nil
}

// loadSuite reads --tasks: a file, or a suite compiled in.
func loadSuite(name string) (*eval.Suite, error) {
	if b, ok := strings.CutPrefix(name, builtinPrefix); ok {
		if b != dataanalysis.Name {
			return nil, usagef("--tasks %s: the built-in suite is %s%s", name, builtinPrefix, dataanalysis.Name)
		}
		return dataanalysis.Load()
	}
	s, err := eval.LoadFile(name)
	if err != nil {
		return nil, usageError{err}
	}
	return s, nil
}

// runEval loads the suite and earlier results, runs what is left with one
// warm sandbox and one checker, and prints the report. An interrupted run
// prints what it has and says how to resume.
func runEval(ctx context.Context, o evalOptions, cfg eval.Config, s stdio) error {
	started := time.Now()
	suite, err := loadSuite(o.Tasks)
	if err != nil {
		return err
	}
	var pcfg llm.Config
	var samples map[string][]string
	if o.SamplesFile != "" {
		if samples, err = eval.ReadSamples(o.SamplesFile, suite.Tasks); err != nil {
			return usageError{err}
		}
		cfg.Model = eval.SamplesModelPrefix + filepath.Base(o.SamplesFile)
		cfg.Mode, cfg.MaxIterations = eval.ModeNone, 1
	} else {
		if pcfg, err = o.Provider.resolve(o.Getenv); err != nil {
			return err
		}
		cfg.Model = pcfg.Model
		cfg.Agent.Secrets = []string{pcfg.APIKey, o.Getenv(llm.EnvOpenAIKey), o.Getenv(llm.EnvAnthropicKey)}
	}
	cfg.Suite = suite.Name
	var prior []eval.Record
	if o.Results != "" {
		if prior, err = eval.ReadResults(o.Results); err != nil {
			return usageError{err}
		}
	}
	var only []string
	for _, id := range strings.Split(o.Only, ",") {
		if id = strings.TrimSpace(id); id != "" {
			only = append(only, id)
		}
	}
	key := eval.Key{Model: cfg.Model, Mode: cfg.Mode, MaxIterations: eval.AgentConfig(agent.Config{}, cfg.Mode, cfg.MaxIterations).MaxIterations}
	tasks, nSamples := suite.Tasks, o.Samples
	if samples != nil {
		tasks, nSamples = eval.WithSamples(suite.Tasks, samples)
	}
	scope, todo, err := eval.Plan(tasks, prior, key, eval.Selection{Limit: o.Limit, Only: only, Samples: nSamples})
	if err != nil {
		return usageError{err}
	}
	if samples != nil {
		todo = eval.AttachSamples(todo, samples)
	}
	var recs []eval.Record
	if len(todo) > 0 {
		if recs, err = evalTasks(ctx, o, cfg, pcfg, todo, s); err != nil && !errors.Is(err, context.Canceled) {
			return err
		}
	}
	interrupted := errors.Is(err, context.Canceled)
	ks, _ := o.ks()
	all := eval.InScope(eval.Latest(append(prior, recs...), key), scope, nSamples)
	sum := eval.Summarize(suite.Name, key, len(scope), all, ks...)
	sum.ElapsedMS = time.Since(started).Milliseconds()
	if len(todo) == 0 {
		fmt.Fprintf(s.err, "codeagent: every selected task has results for each of its samples in %s; --only ID reruns one\n", o.Results)
	}
	if werr := writeSummary(o, sum, s.out); werr != nil {
		return werr
	}
	if interrupted {
		return evalStopped{done: len(recs), total: len(todo), results: o.Results}
	}
	return nil
}

// evalStopped is an evaluation that ended early: it says how far it got
// and how to resume.
type evalStopped struct {
	done, total int
	results     string
}

func (e evalStopped) detail() string {
	s := fmt.Sprintf(" after %d of %d sample(s)", e.done, e.total)
	if e.results != "" {
		s += fmt.Sprintf("; run the same command again to resume from %s", e.results)
	}
	return s
}

func (e evalStopped) Error() string { return "interrupted" + e.detail() }
func (e evalStopped) Unwrap() error { return context.Canceled }

// evalTasks opens the sandbox, checker, model and results file, and runs
// the tasks with a progress bar on a terminal.
func evalTasks(ctx context.Context, o evalOptions, cfg eval.Config, pcfg llm.Config, todo []eval.Job, s stdio) ([]eval.Record, error) {
	logger := newLogger(s.err)
	sb, err := openBackend(o.Backend, o.Backends.options(backends.Options{Warm: max(2, o.Concurrency), WarmPython: max(2, o.Concurrency),
		AllowWeakIsolation: o.AllowWeak, Logger: logger}))
	if errors.Is(err, backends.ErrUnknown) {
		return nil, usageError{err}
	}
	if err != nil {
		return nil, err
	}
	defer sb.Close()
	var deps eval.Deps
	if o.Results != "" {
		if deps.Results, err = eval.OpenResults(o.Results); err != nil {
			return nil, usageError{err}
		}
		defer deps.Results.Close()
	}
	if o.Progress || isTerminal(s.err) {
		bar := eval.NewProgress(s.err, len(todo))
		deps.OnRecord = bar.Record
		defer bar.Finish()
	}
	if o.SamplesFile != "" {
		return eval.ScoreSamples(ctx, cfg, &eval.Scorer{Sandbox: sb, Limits: cfg.Score}, todo, deps)
	}
	checker, err := app.NewChecker(nil)
	if err != nil {
		return nil, err
	}
	defer checker.Close()
	provider, err := newProvider(pcfg, logger, nil)
	if err != nil {
		return nil, err
	}
	deps.Provider, deps.Sandbox, deps.Checker, deps.Logger = provider, sb, checker, logger
	r, err := eval.New(cfg, deps)
	if err != nil {
		return nil, usageError{err}
	}
	return r.Run(ctx, todo)
}

// writeSummary prints the summary (Markdown, or JSON with --json) and
// writes --report.
func writeSummary(o evalOptions, sum eval.Summary, out io.Writer) error {
	if o.JSON {
		if err := sum.WriteJSON(out); err != nil {
			return err
		}
	} else if err := sum.WriteMarkdown(terminalSafe(out)); err != nil {
		return err
	}
	if o.Report == "" {
		return nil
	}
	f, err := os.Create(o.Report)
	if err != nil {
		return usagef("--report: %w", err)
	}
	if strings.EqualFold(filepath.Ext(o.Report), ".json") {
		err = sum.WriteJSON(f)
	} else {
		err = sum.WriteMarkdown(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("--report: %w", err)
	}
	return nil
}

// evalCompare prints a comparison of results files.
func evalCompare(o evalOptions, s stdio) error {
	var files []string
	for _, f := range strings.Split(o.Compare, ",") {
		if f = strings.TrimSpace(f); f != "" {
			files = append(files, f)
		}
	}
	c, err := eval.Compare(files)
	if err != nil {
		return usageError{err}
	}
	if o.JSON {
		return c.WriteJSON(s.out)
	}
	return c.WriteMarkdown(terminalSafe(s.out))
}

// terminalSafe escapes what is written to w when w is a terminal: task ids,
// error messages and model names in a report come from files and models.
func terminalSafe(w io.Writer) io.Writer {
	if termtext.IsTerminal(w) {
		return termtext.NewWriter(w)
	}
	return w
}
