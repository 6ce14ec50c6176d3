package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/codeagent/codeagent/llm"
	"github.com/codeagent/codeagent/llm/extract"
	"github.com/codeagent/codeagent/safety"
	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/workspace"
)

// run is the state of one Run.
type run struct {
	a         *Agent
	task      Task
	ws        *workspace.Workspace
	res       *Result
	before    workspace.Snapshot
	imports   []string // the program's sandbox.Spec.Imports, as last written
	deliver   []string // files the task names that a program must write
	installed string   // the requirements installed for the run's programs, as declared
	files     string   // the workspace described for prompts
	system    string
	msgs      []llm.Message
	tests     string // the tests deciding success, as run
	userTests bool
	failures  []string  // one line per failed attempt, for a fresh start
	learned   []learned // what runs that succeeded printed, for a fresh start
	missing   []string  // files and keys runs did not find, for a fresh start
	mode      string    // the mode in effect: ModeProgram, ModeTools, or ModeAuto until decided
	// pending is auto mode's first answer (or why it was unusable), for
	// program mode's first attempt.
	pending    string
	pendingBad *badAnswer
	// network is what programs may reach: the configuration's, with
	// what a person granted in this run (see gate).
	network      *sandbox.Network
	approvals    int  // approvals asked so far, naming the next
	approvedRest bool // a person approved the rest of the run
	// lint is the last check's lint warnings, for the next feedback (say).
	lint []safety.Finding
	// trace is what the last program run's failing frames held, and cut
	// what was taken out of the last execution's output (see exec).
	trace string
	cut   []Cut
}

// Run works on task until it is done or the budget is spent. The error is
// non-nil only when the run could not go on: the model provider failed
// (an *llm.Error, after its retries), the sandbox could not run programs,
// the workspace failed, or ctx ended. Not achieving the task is not an
// error: Result.Success is false. The Result is never nil.
func (a *Agent) Run(ctx context.Context, task Task) (*Result, error) {
	started := time.Now()
	r := &run{a: a, task: task, ws: task.Workspace, res: &Result{Language: a.lang.Name, History: []Attempt{}, Artifacts: []workspace.Artifact{}},
		network: a.cfg.Network}
	if strings.TrimSpace(task.Prompt) == "" || task.Workspace == nil {
		return r.res, fmt.Errorf("%w: a task needs a prompt and a workspace", ErrConfig)
	}
	err := r.run(ctx)
	if stop := (*StoppedError)(nil); errors.As(err, &stop) {
		r.res.Stopped, r.res.Message, err = true, r.a.redact.String(stop.Error()), nil
	}
	r.finish(err, started)
	return r.res, err
}

func (r *run) run(ctx context.Context) error {
	cfg := r.a.cfg
	before, err := r.ws.Snapshot(cfg.Artifacts)
	if err != nil {
		return err
	}
	r.before = before
	r.deliver = deliverables(r.task.Prompt, before)
	r.files = r.a.redact.String(r.ws.Describe(r.exclude))
	r.system = render("system.txt", r.systemData())
	switch {
	case r.task.TestCode != "" && r.a.tests == nil:
		return fmt.Errorf("%w: tests need %s, not %s", ErrConfig, TestLanguages(), r.a.lang.Name)
	case r.task.TestCode != "":
		r.tests, r.userTests = r.task.TestCode, true
		r.res.Tests = r.a.redact.Code(r.task.TestCode)
		if err := r.ws.WriteFile(r.a.TestFile(), []byte(r.tests)); err != nil {
			return err
		}
	case cfg.Tests:
		ok, err := r.makeTests(ctx)
		if err != nil {
			return err
		}
		if !ok {
			r.res.Message = fmt.Sprintf("no usable tests after %d tries", cfg.MaxTestRounds)
			return nil
		}
	}
	if r.mode = r.a.modeFor(r.task); r.mode != ModeProgram {
		program, err := r.runTools(ctx)
		if !program || err != nil {
			return err
		}
		r.system = render("system.txt", r.systemData())
	}
	r.mode, r.res.Mode = ModeProgram, ModeProgram
	return r.loop(ctx)
}

// modeFor is the mode a task starts in: auto takes program mode where
// tool mode does not apply (tests, an acceptance check, a network).
func (a *Agent) modeFor(t Task) string {
	if a.cfg.Mode == ModeAuto && (a.cfg.Tests || t.TestCode != "" || t.Accept != nil || a.cfg.Network != nil) {
		return ModeProgram
	}
	return a.cfg.Mode
}

func (r *run) systemData() map[string]any {
	lim := r.a.cfg.Limits.WithDefaults()
	return map[string]any{
		"Lang": r.a.lang.Name, "File": r.a.SolutionFile(), "Fence": r.a.lang.Name,
		"Command":  strings.Join(r.a.lang.Command(r.a.SolutionFile()), " "),
		"Packages": r.a.packages(), "Timeout": lim.WallTime.String(), "Memory": sandbox.FormatSize(lim.Memory),
		"Network": allowedHosts(r.a.cfg.Network), "Install": r.installable(), "Approve": r.approving(),
	}
}

// packages names what a program may use, per language, for the prompt.
var packages = map[string]string{
	"python":     "the Python standard library, pandas, numpy and matplotlib",
	"javascript": "node's built-in modules",
	"bash":       "bash and the usual coreutils, sed, awk and grep",
	"go":         "the Go standard library (Go 1.19, no modules to download)",
}

// packages names what a program may use, for the prompt: the image's, and
// what was installed for the run.
func (a *Agent) packages() string {
	p := packages[a.lang.Name]
	installed := a.cfg.Installed
	if in, ok := a.deps.Installer.(interface{ Installed() []string }); ok && len(installed) == 0 {
		installed = in.Installed()
	}
	switch {
	case len(installed) == 0:
	case a.lang.Name == "python":
		p += ", and these packages installed for this task: " + strings.Join(installed, ", ")
	case a.lang.Name == "javascript":
		p += ", and these packages installed for this task (load them with require): " + strings.Join(installed, ", ")
	}
	return p
}

// loop iterates attempts, starting afresh from the task after
// FreshStartAfter failed repairs in a row. A run that succeeded but was
// judged incomplete is progress, not a failed repair.
func (r *run) loop(ctx context.Context) error {
	cfg := r.a.cfg
	r.msgs = []llm.Message{r.user(render("task.txt", r.taskData(1)))}
	failedRepairs := 0
	for n := 1; n <= cfg.MaxIterations; n++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		fresh := false
		if n > 1 && cfg.FreshStartAfter > 0 && failedRepairs >= cfg.FreshStartAfter {
			r.msgs = []llm.Message{r.user(render("fresh.txt", r.freshData(n)))}
			failedRepairs, fresh = 0, true
			r.a.log.Debug("fresh start", "attempt", n)
		}
		at, done, err := r.attempt(ctx, n, fresh)
		r.res.History = append(r.res.History, at)
		r.res.Attempts, r.res.Coverage = n, at.Coverage
		if err != nil {
			return err
		}
		if done {
			r.res.Success = true
			return nil
		}
		r.a.log.Debug("attempt failed", "attempt", n, "class", at.ErrorClass)
		switch {
		case at.ErrorClass == ClassIncomplete:
			failedRepairs = 0
		case n > 1 && !fresh:
			failedRepairs++
		}
	}
	r.res.Message = fmt.Sprintf("the task was not achieved within %d attempts", cfg.MaxIterations)
	if k := len(r.failures); k > 0 {
		r.res.Message += "; the last: " + r.failures[k-1]
	}
	return nil
}

func (r *run) taskData(n int) map[string]any {
	d := map[string]any{
		"Task": r.task.Prompt, "History": r.a.redact.String(r.task.History), "Files": r.files, "Tests": r.tests, "TestFile": r.a.TestFile(),
		"Attempt": n, "Max": r.a.cfg.MaxIterations, "Fence": r.a.lang.Name,
	}
	if tr := r.a.tests; tr != nil {
		d["TestTool"], d["TestGuide"], d["TestShape"] = tr.Tool, tr.Guide, tr.Shape
		d["TestRun"] = strings.Join(tr.Command, " ")
	}
	return d
}

// attempt generates, checks, runs and verifies one program. done reports
// success; a failure has been fed back into r.msgs.
func (r *run) attempt(ctx context.Context, n int, fresh bool) (at Attempt, done bool, err error) {
	at = Attempt{N: n, FreshStart: fresh, Check: []safety.Finding{}}
	r.emit(Event{Type: EventAttemptStart, Attempt: n, Phase: PhaseCode, FreshStart: fresh})
	t0 := time.Now()
	answer, bad, err := r.pending, r.pendingBad, error(nil)
	if r.pending == "" && r.pendingBad == nil {
		answer, bad, err = r.chat(ctx, r.system, r.msgs, false)
	}
	r.pending, r.pendingBad = "", nil
	if err != nil {
		return at, false, err
	}
	if bad != nil {
		r.refuseAnswer(n, &at, bad, t0)
		return at, false, nil
	}
	fence := r.a.lang.Name
	x, xerr := extract.Code(answer, fence)
	if xerr != nil {
		at.ErrorClass = ClassNoCode
		r.emit(Event{Type: EventGenerated, Attempt: n, Phase: PhaseCode, ErrorClass: ClassNoCode, DurationMS: ms(t0)})
		r.msgs = append(r.msgs, llm.Message{Role: llm.RoleAssistant, Content: r.a.redact.String(answer)},
			r.user(render("nocode.txt", r.feedbackData(n))))
		r.fail(n, ClassNoCode, "the answer held no code block")
		return at, false, nil
	}
	code := x.Code
	at.Code, at.Source = r.a.redact.Code(code), code
	r.res.Code, r.res.Source = at.Code, code
	r.msgs = append(r.msgs, llm.Message{Role: llm.RoleAssistant, Content: "```" + fence + "\n" + at.Code + "```"})
	r.emit(Event{Type: EventGenerated, Attempt: n, Phase: PhaseCode, Code: at.Code, CodeSHA256: sha(code), DurationMS: ms(t0)})

	findings, err := r.check(ctx, n, PhaseCode, code)
	if err != nil {
		return at, false, err
	}
	at.Check = withLint(findings, r.lint)
	code, pass, err := r.gateProgram(ctx, n, code, findings, &at)
	if !pass || err != nil {
		return at, false, err
	}
	if ok, err := r.install(ctx, n, code, &at); !ok || err != nil {
		return at, false, err
	}
	if err := r.ws.WriteFile(r.a.SolutionFile(), []byte(code)); err != nil {
		return at, false, err
	}
	r.imports = safety.ImportsHint(ctx, r.a.lang.Name, []byte(code))

	if r.tests != "" {
		res, pass, err := r.runTests(ctx, n, &at)
		if !pass || err != nil {
			return at, false, err
		}
		if r.userTests {
			r.res.Output = string(res.Stdout)
			ok, err := r.accept(ctx, n, code, &at)
			return at, ok, err
		}
	}
	phase := PhaseCode
	if r.tests != "" {
		phase = PhaseProgram
	}
	res, class, err := r.exec(ctx, n, phase, false)
	if err != nil {
		return at, false, err
	}
	at.Result, at.Cut = resultJSON(res), append(at.Cut, r.cut...)
	r.res.Output = string(res.Stdout)
	if class != ClassNone {
		at.ErrorClass = class
		r.debug(n, class, at.Code, res, false)
		return at, false, nil
	}
	r.learn(n, res.Stdout)
	if ok, err := r.accept(ctx, n, code, &at); !ok || err != nil {
		return at, false, err
	}
	if missing := r.missingDeliverables(); len(missing) > 0 {
		// The task names files this program did not write: not done,
		// whatever a verifier would say of its output.
		at.ErrorClass = ClassIncomplete
		d := r.feedbackData(n)
		d["Missing"] = "the task names files the program did not write: " + strings.Join(missing, ", ")
		d["Stdout"] = r.clip(res.Stdout)
		d["Artifacts"] = r.artifactList()
		r.say(render("incomplete.txt", d))
		r.fail(n, ClassIncomplete, "ran, but missing: "+strings.Join(missing, ", "))
		return at, false, nil
	}
	if !r.a.cfg.Verify || r.tests != "" {
		return at, true, nil
	}
	v, err := r.verify(ctx, n, at.Code, res)
	if err != nil {
		return at, false, err
	}
	at.Verdict = &v
	if !v.TaskComplete {
		at.ErrorClass = ClassIncomplete
		d := r.feedbackData(n)
		d["Missing"] = v.Missing
		d["Stdout"] = r.clip(res.Stdout)
		d["Artifacts"] = r.artifactList()
		r.say(render("incomplete.txt", d))
		r.fail(n, ClassIncomplete, "ran, but "+v.Missing)
		return at, false, nil
	}
	return at, true, nil
}

// accept runs the caller's acceptance check, when there is one, on code
// that ran successfully, and feeds a rejection back to the model.
func (r *run) accept(ctx context.Context, n int, code string, at *Attempt) (bool, error) {
	if r.task.Accept == nil {
		return true, nil
	}
	t0 := time.Now()
	acc, err := r.task.Accept(ctx, code)
	if err != nil {
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		return false, fmt.Errorf("acceptance check: %w", err)
	}
	acc.Output = r.clip([]byte(r.a.redact.String(acc.Output)))
	switch {
	case acc.Passed:
		acc.Class = ClassNone
	case acc.Class == ClassNone:
		acc.Class = ClassAssertion
	}
	at.Acceptance = &acc
	r.emit(Event{Type: EventAccepted, Attempt: n, Phase: PhaseCode, Acceptance: &acc, ErrorClass: acc.Class, DurationMS: ms(t0)})
	if acc.Passed {
		return true, nil
	}
	at.ErrorClass = acc.Class
	d := r.feedbackData(n)
	d["Class"], d["Hint"] = acc.Class, classHints[acc.Class]
	d["Numbered"], d["Output"] = numbered(at.Code), acc.Output
	r.say(render("accept.txt", d))
	r.fail(n, acc.Class, "ran, but the acceptance tests failed: "+lastLine(acc.Output))
	return false, nil
}

// check runs the static checker on the program and emits its event.
func (r *run) check(ctx context.Context, n int, phase, code string) ([]safety.Finding, error) {
	return r.checkAs(ctx, Event{Attempt: n, Phase: phase}, r.a.safeLang, code, true)
}

// checkAs checks code in language l and emits the checked event, e with
// the findings and, when lint, the lint warnings, which r.lint keeps.
func (r *run) checkAs(ctx context.Context, e Event, l safety.Language, code string, lint bool) ([]safety.Finding, error) {
	t0 := time.Now()
	rep, err := r.a.deps.Checker.Check(ctx, l, []byte(code))
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("static check: %w", err)
	}
	findings := r.keep(rep, code, lint)
	safe := len(findings) == 0
	e.Type, e.Findings, e.Safe, e.ErrorClass, e.DurationMS = EventChecked, withLint(findings, r.lint), &safe, ClassifyFindings(findings), ms(t0)
	r.emit(e)
	return findings, nil
}

// debug feeds a failed run back to the model.
func (r *run) debug(n int, class ErrorClass, code string, res sandbox.Result, tests bool) {
	d := r.feedbackData(n)
	d["Class"], d["Hint"] = class, classHints[class]
	if class == ClassImport {
		d["Hint"] = r.importHint()
	}
	d["Numbered"] = numbered(code)
	d["Stdout"], d["Stderr"], d["TestOutput"], d["Trace"] = r.clip(res.Stdout), r.clip(res.Stderr), "", r.clip([]byte(r.trace))
	problem := fmt.Sprintf("The program exited with status %d.", res.ExitStatus())
	if res.Status != sandbox.StatusError && res.Message != "" {
		problem = "The program was stopped: " + res.Message + "."
	}
	detail := lastLine(string(res.Stderr))
	if tests {
		problem = fmt.Sprintf("The tests failed (%s exit status %d).", r.a.tests.Tool, res.ExitStatus())
		d["TestOutput"], d["Stdout"], d["TestTool"] = d["Stdout"], "", r.a.tests.Tool
		detail = r.a.tests.FailedLine(string(res.Stdout))
	}
	if res.StdoutTruncated || res.StderrTruncated {
		problem += " Its output was cut at the sandbox's output limit."
	}
	if refused := networkRefusals(res.Egress); refused != "" {
		problem += " " + refused
		detail = refused
	}
	d["Problem"] = problem
	r.say(render("debug.txt", d))
	if detail == "" || class == ClassTimeout || class == ClassMemory {
		detail = strings.TrimSuffix(problem, ".")
	}
	if !tests {
		detail += r.failedLine(code, string(res.Stderr))
		r.noteMissing(string(res.Stderr))
	}
	r.fail(n, class, detail)
}

func (r *run) feedbackData(n int) map[string]any {
	return map[string]any{
		"Attempt": n, "Max": r.a.cfg.MaxIterations, "Left": r.a.cfg.MaxIterations - n,
		"Fence": r.a.lang.Name, "File": r.a.SolutionFile(),
	}
}

// fail records a one-line summary of a failed attempt for a fresh start.
func (r *run) fail(n int, class ErrorClass, detail string) {
	r.failures = append(r.failures, fmt.Sprintf("attempt %d (%s): %s", n, class, cutRunes(detail, 300)))
}

func (r *run) user(s string) llm.Message {
	return llm.Message{Role: llm.RoleUser, Content: r.a.redact.String(s)}
}

func (r *run) say(s string) { r.msgs = append(r.msgs, r.user(s+r.lintNote())) }

// exclude drops the agent's own files from artifacts and descriptions.
func (r *run) exclude(rel string) bool {
	return rel == r.a.SolutionFile() || rel == r.a.TestFile()
}

// emit sends e to the observer.
func (r *run) emit(e Event) {
	if r.a.deps.Observer == nil {
		return
	}
	e.Time = time.Now().UTC()
	if e.MaxAttempts == 0 {
		e.MaxAttempts = r.a.cfg.MaxIterations
		if e.Phase == PhaseTests {
			e.MaxAttempts = r.a.cfg.MaxTestRounds
		}
	}
	r.a.deps.Observer.Event(e)
}

// finish lists the artifacts and emits the done event.
func (r *run) finish(err error, started time.Time) {
	if r.before.Files != nil {
		arts, skipped, aerr := r.ws.Changes(r.before, r.a.cfg.Artifacts, r.exclude)
		if aerr != nil {
			r.a.log.Warn("listing artifacts failed", "err", aerr)
		}
		if arts != nil {
			r.res.Artifacts = arts
		}
		r.res.Skipped = skipped
	}
	if err != nil {
		r.res.Message = r.a.redact.String(err.Error())
	}
	if r.res.Mode == "" && r.mode != ModeAuto {
		r.res.Mode = r.mode
	}
	ok := r.res.Success
	r.emit(Event{Type: EventDone, Attempt: r.res.Attempts, Mode: r.res.Mode, Success: &ok, Message: r.res.Message, DurationMS: ms(started)})
}

// resultJSON is the exec --json form of an (already redacted) result.
func resultJSON(res sandbox.Result) *sandbox.ResultJSON {
	j := res.JSON()
	return &j
}

func ms(t time.Time) int64 { return time.Since(t).Milliseconds() }
