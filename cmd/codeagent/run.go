package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/codeagent/codeagent/agent"
	"github.com/codeagent/codeagent/app"
	"github.com/codeagent/codeagent/llm"
	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/store"
	"github.com/codeagent/codeagent/termtext"
)

// localPerMinute is a local run's default rate limit per session: well
// above what a run's attempts (5 by default, with tests 10; 20 tool calls)
// reach, so that a user's own runs of one session, one after another,
// never wait; a server's and MCP's sessions, shared, keep the library's
// default (ratelimit.DefaultPerMinute), and a manifest's
// executions_per_minute sets either.
const localPerMinute = 120

// Bounds on what run reads from the user.
const (
	maxInputFile = 1 << 30  // one --file
	maxTestFile  = 10 << 20 // --test-file
)

// runOptions are the inputs of `codeagent run`.
type runOptions struct {
	Task            string
	Deps            depsFlags
	Provider        *providerFlags
	MaxIterations   int
	FreshStartAfter int
	Files           []string
	Workdir         string
	Out             string
	Force           bool     // with Out: replace files already there
	Folder          string   // the folder the run is offered (see run_folder.go); "" none
	NoFolder        bool     // do not offer the current folder
	Apply           bool     // apply the run's changes to the folder without asking
	ApplySensitive  []string // paths of refused names the person lets the apply write
	Diff            bool     // show a unified diff of the changes
	Tests           bool
	TestFile        string
	MinCoverage     float64 // refused: coverage is self-reported
	NoVerify        bool
	NoTrace         bool // no values of failing frames in repair requests
	Lang            string
	Limits          sandbox.Limits
	JSON            bool
	Events          string // "", "-" (stdout) or a file
	Progress        bool   // force live progress on stderr
	Backend         string
	AllowWeak       bool
	Backends        *backendFlags // --image and the kubernetes backend's settings
	Session         string        // continue (or start) this session
	Wait            bool          // wait for a session another process is running
	DataDir         string
	Manifest        string
	Net             networkFlags
	Mode            string // tools, program or auto
	MaxSteps        int    // tool calls in tool mode
	Approval        approvalFlags
	Getenv          func(string) string

	setFlags map[string]bool           // flags given on the command line
	tools    map[string]sandbox.Limits // the manifest's execute tools with their limits (nil: all)
}

// repeated collects a repeatable string flag.
type repeated []string

func (r *repeated) String() string     { return strings.Join(*r, ",") }
func (r *repeated) Set(s string) error { *r = append(*r, s); return nil }

func cmdRun(ctx context.Context, s stdio, args []string) int {
	fs := newFlagSet("run", s)
	fs.Usage = func() {
		fmt.Fprintln(s.err, "usage: codeagent run [flags] \"TASK\"\n\nTurn a task into working code: generate, check, run in the sandbox, verify, debug.\nExit status: 0 on success, 1 when the task was not achieved within the budget,\n2 for usage or configuration errors, 3 when the model provider failed, 75 when\nthe session is in use by another process, 125 when the sandbox could not be set\nup, 130 on Ctrl-C (143 on SIGTERM).\n\nflags:")
		printFlags(fs)
	}
	o := runOptions{Getenv: os.Getenv}
	o.Provider = addProviderFlags(fs)
	intVar(fs, &o.MaxIterations, "max-iterations", agent.DefaultMaxIterations, 1, 0, "attempts at the program (verification rounds in tool mode), at most "+strconv.Itoa(agent.MaxIterationsCeiling))
	intVar(fs, &o.FreshStartAfter, "fresh-start-after", agent.DefaultFreshStartAfter, 0, 100, "failed repairs in a row before starting afresh from the task (0: never)")
	fs.Var((*repeated)(&o.Files), "file", "copy an input file into the workspace (repeatable)")
	fs.StringVar(&o.Workdir, "workdir", "", "workspace directory, kept afterwards (default: a temporary one)")
	fs.StringVar(&o.Out, "out", "", "copy the files the program created, and the program if it succeeded, to this directory")
	fs.BoolVar(&o.Force, "force", false, "with --out: replace files already in the directory")
	fs.BoolVar(&o.Apply, "apply", false, "apply the run's changes to the current folder without asking (after a success)")
	fs.Var((*repeated)(&o.ApplySensitive), "apply-sensitive", "with --apply: apply PATH although its name is refused, as .npmrc (repeatable; never .git)")
	fs.BoolVar(&o.Diff, "diff", false, "show a unified diff of the run's changes to the current folder")
	fs.BoolVar(&o.NoFolder, "no-folder", false, "do not offer the current folder to the program: start from an empty workspace")
	fs.BoolVar(&o.Tests, "tests", false, "test-driven: the model writes tests first (pytest, node --test, go test), then the code")
	fs.StringVar(&o.TestFile, "test-file", "", "tests to pass: pytest importing solution, node --test requiring ./solution.js, or go test")
	fs.Float64Var(&o.MinCoverage, "min-coverage", 0, "refused: coverage is self-reported, the program can forge it (docs/RUN.md)")
	fs.BoolVar(&o.NoVerify, "no-verify", false, "do not ask the model whether a successful run completed the task")
	fs.BoolVar(&o.NoTrace, "no-trace", false, "do not show the model the values a failing Python program's last frames held")
	fs.StringVar(&o.Lang, "lang", "", "language: python, javascript, bash or go (default: the one the task names, else python)")
	durationVar(fs, &o.Limits.WallTime, "timeout", 0, boundProgramTime, "wall-clock limit of each program run (default 30s)")
	sizeVar(fs, &o.Limits.Memory, "memory", boundMemory, "memory limit of each program run (default 256MiB)")
	fs.Var(cpusFlag{&o.Limits.CPUs}, "cpus", "CPU limit in cores of each program run (default 1)")
	fs.BoolVar(&o.JSON, "json", false, "print one JSON object with the outcome and the history")
	fs.StringVar(&o.Events, "events", "", "write one JSON line per step to FILE, or - for stdout")
	fs.BoolVar(&o.Progress, "progress", false, "show live progress on stderr even when it is not a terminal")
	o.Backends = addSandboxFlags(fs, &o.Backend, &o.AllowWeak)
	fs.StringVar(&o.Session, "session", "", "continue this session (same workspace, earlier turns in context); created if new")
	fs.BoolVar(&o.Wait, "wait", false, "with --session: wait while another process runs the session instead of failing")
	fs.StringVar(&o.DataDir, "data-dir", "", "data directory for sessions and the audit log (default $XDG_DATA_HOME/codeagent)")
	fs.StringVar(&o.Manifest, "manifest", "", "manifest declaring tools, limits, policy and model")
	fs.StringVar(&o.Mode, "mode", agent.ModeAuto, "tools (the model calls tools), program (it writes whole programs) or auto")
	intVar(fs, &o.MaxSteps, "max-steps", agent.DefaultMaxSteps, 1, 0, "tool calls in tool mode, within --max-iterations rounds, at most "+strconv.Itoa(agent.MaxStepsCeiling))
	o.Net.register(fs)
	o.Deps.register(fs)
	o.Approval.register(fs)
	if code, done := parseFlags(fs, args); done {
		return code
	}
	o.setFlags = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { o.setFlags[f.Name] = true })
	if fs.NArg() != 1 || strings.TrimSpace(fs.Arg(0)) == "" {
		return usageLine(fs, s, "give the task as one quoted argument, after the flags")
	}
	o.Task = fs.Arg(0)
	if err := o.validate(fs); err != nil {
		return exitCodeFor(s.err, err)
	}
	if err := o.Approval.check(s); err != nil {
		return exitCodeFor(s.err, err)
	}
	res, fin, err := runRun(ctx, o, s)
	defer fin.close()
	if code, ok := exitInterrupted(ctx, s.err, ""); ok {
		fin.keep(o, s) // an interrupted run's changes are kept, never applied
		return code
	}
	return runExit(s, o, res, fin, err)
}

// validate checks flag combinations; the rules of the run itself are
// app.RunRequest.Validate's (prepareRun).
func (o *runOptions) validate(fs *flag.FlagSet) error {
	switch {
	case o.Tests && o.TestFile != "":
		return usagef("--tests and --test-file exclude each other: the model writes tests, or you give them")
	case o.MinCoverage != 0:
		return usagef("--min-coverage is refused: coverage is self-reported (measured in the process that runs the program, which can " +
			"forge it), so it cannot decide a run; the result reports it (see docs/RUN.md)")
	case o.Events == "-" && o.JSON:
		return usagef("--events - and --json both want stdout: write the events to a file")
	case o.Session != "" && o.Workdir != "":
		return usagef("--session and --workdir exclude each other: a session keeps its own workspace")
	case o.Wait && o.Session == "":
		return usagef("--wait is for --session: only a session can be in use by another process")
	case o.Mode == agent.ModeProgram && o.setFlags["max-steps"]:
		return usagef("--max-steps counts tool calls: it is for --mode tools or auto")
	}
	if o.Session != "" {
		if err := checkSessionName(o.Session); err != nil {
			return err
		}
	}
	folder, err := folderFor(o)
	if err != nil {
		return err
	}
	o.Folder = folder
	if o.FreshStartAfter == 0 {
		o.FreshStartAfter = -1 // 0 on the command line means never
	}
	// Refused before the run: a refused directory would cost a whole run.
	if err := checkWorkdir("workdir", o.Workdir); err != nil {
		return err
	}
	return checkWorkdir("out", o.Out)
}

// runRun runs the agent on the task: the request read and validated
// (prepareRun) before anything is opened, then the store and session, the
// sandbox, the installer, the checker and the observers, the run started
// in its session (whose lease comes before its workspace is touched), its
// workspace (runWorkspace), the agent (agentRun) and the files copied out
// (copyRunOut). Errors before the run are usage errors where the user can
// fix them.
func runRun(ctx context.Context, o runOptions, s stdio) (res *agent.Result, fin *folderFinish, err error) {
	p, err := prepareRun(&o)
	if err != nil {
		return nil, nil, err
	}
	dataDir, err := resolveDataDir(o.DataDir, o.Getenv)
	if err != nil {
		return nil, nil, err
	}
	st, err := openStore(ctx, dataDir)
	if err != nil {
		return nil, nil, err
	}
	defer st.Close()
	sess, err := ensureSession(ctx, st, dataDir, o.Session)
	if err != nil {
		return nil, nil, err
	}
	logger := newLogger(s.err)
	sb, backend, err := runSandbox(o, p.m, logger)
	if err != nil {
		return nil, nil, err
	}
	defer sb.Close()
	installer, err := runInstaller(ctx, o, p.m, s, sb, backend, dataDir, p.trust)
	if err != nil {
		return nil, nil, err
	}
	rr := p.req
	rr.Sandbox = sb
	if installer != nil {
		defer installer.Close()
		rr.Sandbox, rr.Installer = installer.Sandbox(sb), installer
		if l := installer.Lease(); l != nil {
			for _, pkg := range l.Packages {
				rr.Config.Installed = append(rr.Config.Installed, pkg.Name+" "+pkg.Version)
			}
		}
	}
	checker, err := app.NewChecker(p.policy)
	if err != nil {
		return nil, nil, err
	}
	defer checker.Close()
	obs, closeEvents, err := runObservers(ctx, o, s)
	if err != nil {
		return nil, nil, err
	}
	defer closeEvents()
	rr.Observer = obs
	if rr.Review, rr.Approver, err = o.approvalParts(p.m, p.model, s); err != nil {
		return nil, nil, err
	}
	rr.Session, rr.Purpose, rr.Wait = sess, "codeagent run", o.Wait
	rr.OnWait = func(h *store.LeaseHeldError) { printErr(s.err, "%v: waiting for it (--wait)", h) }
	rr.PerMinute = localPerMinute
	if p.m != nil && p.m.Agent.Limits.ExecutionsPerMinute > 0 {
		rr.PerMinute = p.m.Agent.Limits.ExecutionsPerMinute
	}
	// One checker: the policy is this run's, with or without a network.
	runs := &app.Runs{Store: st, Model: &p.model, Checkers: &app.Checkers{Plain: checker, Net: checker},
		Secrets: []string{o.Getenv(llm.EnvOpenAIKey), o.Getenv(llm.EnvAnthropicKey)}, Logger: logger}
	run, err := runs.StartRun(ctx, rr)
	if err != nil {
		return nil, nil, err
	}
	ws, fin, err := runWorkspace(o, s, sess != nil, dataDir)
	if err != nil {
		run.Close()
		return nil, fin, err
	}
	res, a, err := agentRun(ctx, run, ws, s)
	if a == nil {
		return nil, fin, err
	}
	copyRunOut(o, s, a, ws, res, fin.f != nil)
	return res, fin, err
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool { return termtext.IsTerminal(w) }

func readSmallFile(name string, max int64) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s is larger than %s", name, sandbox.FormatSize(max))
	}
	return b, nil
}

// runExit prints the outcome and returns the exit status.
func runExit(s stdio, o runOptions, res *agent.Result, fin *folderFinish, err error) int {
	if res == nil {
		return exitCodeFor(s.err, err)
	}
	if !o.JSON && o.Events != "-" {
		printRun(s.out, res, o)
	}
	// The folder's changes come after the outcome they belong to.
	folder, ferr := fin.finish(o, s, res)
	if ferr != nil {
		err = errors.Join(err, ferr)
	}
	if o.JSON {
		enc := json.NewEncoder(s.out)
		enc.SetIndent("", "  ")
		out := struct {
			*agent.Result
			Folder *folderOutcome `json:"folder,omitempty"`
		}{res, folder}
		if eerr := enc.Encode(out); eerr != nil && err == nil {
			err = eerr
		}
	}
	switch {
	case err != nil:
		return exitCodeFor(s.err, err)
	case !res.Success:
		printErr(s.err, "%s", res.Message)
		return exitFailure
	case folder != nil && len(folder.Refused) > 0:
		return exitFailure // the changes asked to be applied were not (said above)
	}
	return exitOK
}

// printRun is the human form of the outcome: the code, the program's
// output and the artifacts. Everything in it that the model or the program
// chose is escaped (see termtext): the output keeps its lines, a name is
// one line, so neither can drive a terminal or forge codeagent's lines.
func printRun(w io.Writer, res *agent.Result, o runOptions) {
	var b strings.Builder
	if res.Code != "" {
		code := termtext.Text(res.Code)
		fmt.Fprintf(&b, "── code (%s) ──\n%s", res.Language, code)
		if !strings.HasSuffix(code, "\n") {
			b.WriteString("\n")
		}
	}
	b.WriteString("── output ──\n")
	output := termtext.Text(res.Output)
	if termtext.IsTerminal(w) {
		// At a terminal the program's colours and progress bars show as
		// it meant them; its last colour ends with its output.
		var sgr bool
		if output, sgr = termtext.Program(res.Output); sgr {
			output += termtext.Reset
		}
	}
	b.WriteString(output)
	if output != "" && !strings.HasSuffix(output, "\n") {
		b.WriteString("\n")
	}
	b.WriteString("── artifacts ──\n")
	if len(res.Artifacts) == 0 {
		b.WriteString("(none)\n")
	}
	for _, a := range res.Artifacts {
		fmt.Fprintf(&b, "%s (%s, %s)\n", termtext.Name(a.Path), sandbox.FormatSize(a.Size), a.Change)
	}
	for _, sk := range res.Skipped {
		fmt.Fprintf(&b, "skipped %s: %s\n", termtext.Name(sk.Path), termtext.Name(sk.Reason))
	}
	if o.Out != "" {
		fmt.Fprintf(&b, "copied to %s\n", termtext.Name(o.Out))
	}
	if res.Coverage != nil {
		fmt.Fprintf(&b, "coverage %s\n", res.Coverage)
	}
	status := "failed"
	if res.Success {
		status = "success"
	}
	fmt.Fprintf(&b, "── %s after %d attempt(s), %d model requests, %d tokens ──\n", status, res.Attempts, res.Usage.Requests, res.Usage.TotalTokens)
	io.WriteString(w, b.String())
}
