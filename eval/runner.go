package eval

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/codeagent/codeagent/agent"
	"github.com/codeagent/codeagent/llm"
	"github.com/codeagent/codeagent/safety"
	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/workspace"
)

// Mode is what feedback the agent gets.
type Mode string

// Feedback modes.
const (
	// ModeNone: one attempt, no feedback (the classic pass@1).
	ModeNone Mode = "none"
	// ModeTests: the failing hidden tests' output goes back for repair.
	ModeTests Mode = "tests"
	// ModeSelf: the agent's test-driven mode, with tests it writes itself;
	// the hidden tests only score.
	ModeSelf Mode = "self"
)

// ParseMode reads a feedback mode.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case ModeNone, ModeTests, ModeSelf:
		return m, nil
	}
	return "", fmt.Errorf("feedback %q: want none, tests or self", s)
}

// DefaultMaxIterations is the attempt budget of the tests and self modes.
const DefaultMaxIterations = 3

// Config is how an evaluation runs. Zero fields take the defaults.
type Config struct {
	Mode Mode
	// MaxIterations is the attempt budget in the tests and self modes
	// (default 3); the none mode makes one attempt.
	MaxIterations int
	// Concurrency is how many tasks run at once (default 1).
	Concurrency int
	// Model and Suite label the records.
	Model string
	Suite string
	// TaskTimeout bounds one task's agent run; 0 means no bound.
	TaskTimeout time.Duration
	// Agent is the base agent configuration (limits, secrets, temperature);
	// the mode decides MaxIterations, Verify and Tests.
	Agent agent.Config
	// Score bounds each scoring run; zero fields take the format's
	// defaults (HumanEvalLimits, or 30 s and the sandbox's).
	Score sandbox.Limits
}

// Deps are what an evaluation works with. Provider, Sandbox and Checker
// are required and shared by all tasks.
type Deps struct {
	Provider llm.Provider
	Sandbox  sandbox.Sandbox
	Checker  *safety.Checker
	Logger   *slog.Logger
	// Results, when set, receives each record as its task finishes.
	Results *ResultsFile
	// OnRecord, when set, is called with each record, one at a time.
	OnRecord func(Record)
}

// Runner evaluates tasks.
type Runner struct {
	cfg    Config
	deps   Deps
	agent  *agent.Agent
	scorer *Scorer
	log    *slog.Logger
}

// New validates cfg and deps and returns a Runner.
func New(cfg Config, deps Deps) (*Runner, error) {
	if cfg.Mode == "" {
		cfg.Mode = ModeNone
	}
	if _, err := ParseMode(string(cfg.Mode)); err != nil {
		return nil, err
	}
	if cfg.MaxIterations == 0 {
		cfg.MaxIterations = DefaultMaxIterations
	}
	if cfg.Mode == ModeNone {
		cfg.MaxIterations = 1
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 1
	}
	log := deps.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	a, err := agent.New(AgentConfig(cfg.Agent, cfg.Mode, cfg.MaxIterations), agent.Deps{
		Provider: deps.Provider, Sandbox: deps.Sandbox, Checker: deps.Checker, Logger: log,
	})
	if err != nil {
		return nil, fmt.Errorf("eval: %w", err)
	}
	return &Runner{cfg: cfg, deps: deps, agent: a, scorer: &Scorer{Sandbox: deps.Sandbox, Limits: cfg.Score}, log: log}, nil
}

// AgentConfig is the agent's configuration for a mode: python, no
// verifier (the hidden tests decide), test-driven in the self mode.
func AgentConfig(base agent.Config, mode Mode, maxIterations int) agent.Config {
	c := base
	c.Lang, c.Verify, c.Tests = "python", false, mode == ModeSelf
	c.MaxIterations = maxIterations
	if mode == ModeNone {
		c.MaxIterations = 1
	}
	return c
}

// Key is the configuration the runner's records belong to.
func (r *Runner) Key() Key { return Key{r.cfg.Model, r.cfg.Mode, r.cfg.MaxIterations} }

// Scorer returns the runner's scorer.
func (r *Runner) Scorer() *Scorer { return r.scorer }

// Run evaluates jobs (samples of tasks) with a bounded pool of workers
// and returns the records of the jobs that finished, in the order they
// finished. When ctx ends, running jobs are abandoned unrecorded and Run
// returns ctx's error; the results file stays valid. A failure that dooms
// every task (the sandbox cannot be set up, the model cannot be reached or
// refuses the key) stops the evaluation with that error. A job with Code
// is scored as it is, without the agent.
func (r *Runner) Run(ctx context.Context, jobs []Job) ([]Record, error) {
	return pool(ctx, r.cfg.Concurrency, jobs, r.deps, r.runTask)
}

// ScoreSamples scores jobs that carry their code (completions read from a
// samples file) with a bounded pool, without a model; see Runner.Run. The
// records are labelled with cfg's Model and Suite.
func ScoreSamples(ctx context.Context, cfg Config, scorer *Scorer, jobs []Job, deps Deps) ([]Record, error) {
	r := &Runner{cfg: cfg, deps: deps, scorer: scorer}
	r.cfg.Mode, r.cfg.MaxIterations = ModeNone, 1
	return pool(ctx, max(cfg.Concurrency, 1), jobs, deps, r.scoreSample)
}

// pool runs work on jobs with n workers; see Runner.Run.
func pool(ctx context.Context, n int, jobs []Job, deps Deps, work func(context.Context, Job) (Record, error)) ([]Record, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	queue := make(chan Job)
	var (
		mu  sync.Mutex
		out []Record
		wg  sync.WaitGroup
	)
	for w := 0; w < min(n, len(jobs)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range queue {
				rec, err := work(ctx, j)
				if err != nil {
					if ctx.Err() == nil {
						cancel(err)
					}
					continue
				}
				mu.Lock()
				if deps.Results != nil {
					if err := deps.Results.Append(rec); err != nil {
						cancel(err)
					}
				}
				out = append(out, rec)
				if deps.OnRecord != nil {
					deps.OnRecord(rec)
				}
				mu.Unlock()
			}
		}()
	}
feed:
	for _, j := range jobs {
		select {
		case queue <- j:
		case <-ctx.Done():
			break feed
		}
	}
	close(queue)
	wg.Wait()
	if ctx.Err() != nil {
		return out, context.Cause(ctx)
	}
	return out, nil
}

// newRecord starts the record of a job.
func (r *Runner) newRecord(j Job) Record {
	return Record{TaskID: j.Task.ID, Sample: j.Sample, Suite: r.cfg.Suite, Model: r.cfg.Model, Mode: r.cfg.Mode,
		MaxIterations: r.cfg.MaxIterations, ErrorClasses: []agent.ErrorClass{},
		ScoreSettings: r.scorer.SettingsLabel(j.Task.Format)}
}

// scoreSample scores a job's code as one attempt.
func (r *Runner) scoreSample(ctx context.Context, j Job) (Record, error) {
	start := time.Now()
	rec := r.newRecord(j)
	rec.Attempts = 1
	s, err := r.scorer.Score(ctx, j.Task, j.Code)
	if err != nil {
		return rec, err
	}
	rec.Passed, rec.ScoredForm, rec.CodeSHA256 = s.Passed, s.Form, s.CodeSHA256
	if s.Passed {
		rec.FirstPassAttempt = 1
	} else {
		rec.ScoreClass, rec.ScoreOutput = s.Class, s.Output
		if s.Class != agent.ClassNone {
			rec.ErrorClasses = append(rec.ErrorClasses, s.Class)
		}
	}
	rec.ScoreMS = time.Since(start).Milliseconds()
	rec.WallMS = rec.ScoreMS
	rec.Time = time.Now().UTC().Truncate(time.Millisecond)
	return rec, nil
}

// runTask runs the agent on one sample of a task and scores the code of its attempts
// in order, up to the first that passes, and its final code. The error is
// non-nil only when the task must not be recorded: ctx ended, or a
// failure that stops the evaluation.
func (r *Runner) runTask(ctx context.Context, j Job) (Record, error) {
	if j.Code != "" {
		return r.scoreSample(ctx, j)
	}
	start := time.Now()
	t := j.Task
	rec := r.newRecord(j)
	ws, err := workspace.New("")
	if err != nil {
		return rec, fmt.Errorf("task %s: %w", t.ID, err)
	}
	defer ws.Close()
	for _, f := range t.Files {
		if err := ws.WriteFile(f.Name, f.Data); err != nil {
			return rec, fmt.Errorf("task %s: %w", t.ID, err)
		}
	}
	scores := map[string]Score{} // by code: an attempt is scored once
	score := func(ctx context.Context, code string) (Score, error) {
		if s, ok := scores[code]; ok {
			return s, nil
		}
		s, err := r.scorer.Score(ctx, t, code)
		if err == nil {
			scores[code] = s
		}
		return s, err
	}
	task := agent.Task{Prompt: t.Prompt, Workspace: ws}
	if r.cfg.Mode == ModeTests {
		task.Accept = func(ctx context.Context, code string) (agent.Acceptance, error) {
			s, err := score(ctx, code)
			return agent.Acceptance{Passed: s.Passed, Output: s.Output, Class: s.Class}, err
		}
	}
	actx, cancel := ctx, context.CancelFunc(func() {})
	if r.cfg.TaskTimeout > 0 {
		actx, cancel = context.WithTimeout(ctx, r.cfg.TaskTimeout)
	}
	res, runErr := r.agent.Run(actx, task)
	cancel()
	rec.AgentMS = time.Since(start).Milliseconds()
	if err := ctx.Err(); err != nil {
		return rec, err
	}
	if runErr != nil {
		if fatal(runErr) {
			return rec, fmt.Errorf("task %s: %w", t.ID, runErr)
		}
		rec.Error = runErr.Error()
		if errors.Is(runErr, context.DeadlineExceeded) {
			rec.Error = fmt.Sprintf("the task took longer than %s", r.cfg.TaskTimeout)
		}
		r.log.Warn("task failed to run", "task", t.ID, "err", runErr)
	}
	rec.Attempts, rec.AgentSuccess = res.Attempts, res.Success
	if c := res.Coverage; res.Success && c != nil && c.Unavailable == "" {
		rec.Coverage = &c.Percent
	}
	rec.Requests, rec.InputTokens, rec.OutputTokens, rec.Tokens = res.Usage.Requests, res.Usage.InputTokens, res.Usage.OutputTokens, res.Usage.TotalTokens
	for _, at := range append(append([]agent.Attempt(nil), res.TestRounds...), res.History...) {
		if at.ErrorClass != agent.ClassNone {
			rec.ErrorClasses = append(rec.ErrorClasses, at.ErrorClass)
		}
	}
	t1 := time.Now()
	// The scorer runs the code exactly as the agent ran it; only what is
	// shown (records, feedback) is redacted.
	for _, at := range res.History {
		if at.Source == "" {
			continue
		}
		s, err := score(ctx, at.Source)
		if err != nil {
			return rec, err
		}
		if s.Passed {
			rec.FirstPassAttempt = at.N
			break
		}
	}
	final, err := score(ctx, res.Source)
	if err != nil {
		return rec, err
	}
	rec.Passed, rec.ScoredForm, rec.CodeSHA256 = final.Passed, final.Form, final.CodeSHA256
	if !final.Passed {
		rec.ScoreClass, rec.ScoreOutput = final.Class, r.agent.Redactor().String(final.Output)
	}
	rec.ScoreMS = time.Since(t1).Milliseconds()
	rec.WallMS = time.Since(start).Milliseconds()
	rec.Time = time.Now().UTC().Truncate(time.Millisecond)
	return rec, nil
}

// fatal reports whether err dooms every task, so the evaluation stops.
func fatal(err error) bool {
	var setup *sandbox.SetupError
	if errors.As(err, &setup) || errors.Is(err, sandbox.ErrInvalidSpec) || errors.Is(err, agent.ErrConfig) {
		return true
	}
	switch llm.KindOf(err) {
	case llm.KindAuth, llm.KindNotFound, llm.KindUnreachable, llm.KindModelLoad:
		return true
	}
	return false
}
