package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"

	"github.com/codeagent/codeagent/app"
	"github.com/codeagent/codeagent/deps"
	"github.com/codeagent/codeagent/internal/lateclose"
	"github.com/codeagent/codeagent/internal/lazyre"
	"github.com/codeagent/codeagent/lang"
	"github.com/codeagent/codeagent/manifest"
	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/sandbox/backends"
	"github.com/codeagent/codeagent/termtext"
	"github.com/codeagent/codeagent/workspace"
)

// maxProgramSize bounds the program file that exec accepts.
const maxProgramSize = 10 << 20

// execOptions are the inputs of `codeagent exec`.
type execOptions struct {
	File      string   // path, or "-" for standard input
	Args      []string // the program's arguments (after --)
	Lang      string
	Workdir   string
	Env       map[string]string
	Limits    sandbox.Limits
	JSON      bool
	Backend   string
	AllowWeak bool
	Manifest  string // path of a manifest whose tool limits apply under the flags
	Net       networkFlags
	Backends  *backendFlags
	Deps      depsFlags
	DataDir   *string // where dependency environments and kept changes are
	// The current folder (Folder, "" for none), copied into the
	// workspace, whose changes are kept or applied (--apply).
	Folder         string
	NoFolder       bool
	Apply          bool
	ApplySensitive repeated
}

func cmdExec(ctx context.Context, s stdio, args []string) int {
	fs := newFlagSet("exec", s)
	fs.Usage = func() {
		fmt.Fprintln(s.err, "usage: codeagent exec [flags] FILE|- [-- ARGS...]\n\nRun a program in the sandbox. Exit status: the program's, 124 on timeout,\n137 when killed for memory, 125 when the sandbox could not be set up, 2 for\nusage errors, 130 on Ctrl-C (143 on SIGTERM); 1 when the program succeeded\nbut --apply could not apply its changes.\n\nflags:")
		printFlags(fs)
	}
	o := execOptions{Env: map[string]string{}}
	fs.StringVar(&o.Lang, "lang", "", "language: python, javascript, bash or go (default: from the file extension)")
	durationVar(fs, &o.Limits.WallTime, "timeout", 0, boundProgramTime, "wall-clock limit (default 30s)")
	sizeVar(fs, &o.Limits.Memory, "memory", boundMemory, "memory limit (default 256MiB)")
	fs.Var(cpusFlag{&o.Limits.CPUs}, "cpus", "CPU limit in cores for all its processes together (default 1)")
	sizeVar(fs, &o.Limits.Disk, "disk", boundDisk, "limit for the workspace's growth and /tmp (default 100MiB)")
	fs.StringVar(&o.Workdir, "workdir", "", "workspace directory, written in place and kept (default: a copy of the current folder)")
	fs.BoolVar(&o.NoFolder, "no-folder", false, "start from an empty workspace, not a copy of the current folder")
	fs.BoolVar(&o.Apply, "apply", false, "apply the program's changes to the current folder if it succeeds (all or none; else kept)")
	fs.Var(&o.ApplySensitive, "apply-sensitive", "with --apply: apply PATH although its name is refused, as .npmrc (repeatable; never .git)")
	fs.Var(envFlag(o.Env), "env", "set an environment variable K=V in the sandbox (repeatable)")
	fs.BoolVar(&o.JSON, "json", false, "print one JSON object with the result")
	o.Backends = addSandboxFlags(fs, &o.Backend, &o.AllowWeak)
	fs.StringVar(&o.Manifest, "manifest", "", "manifest: the language's tool must be listed; its limits apply under the flags")
	o.Net.register(fs)
	o.Deps.register(fs)
	o.DataDir = dataDirFlag(fs)
	if code, done := parseFlags(fs, args); done {
		return code
	}
	switch rest := fs.Args(); {
	case len(rest) == 0:
		return usageLine(fs, s, "exec needs the program to run (a file, or - for standard input with --lang)")
	case len(rest) > 1 && rest[1] != "--":
		return usageLine(fs, s, "the program's arguments go after --: codeagent exec [flags] %s -- %s", rest[0], strings.Join(rest[1:], " "))
	case len(rest) > 1:
		o.Args = rest[2:]
	}
	o.File = fs.Arg(0)
	if o.Workdir != "" || o.NoFolder {
		if o.Apply || len(o.ApplySensitive) > 0 {
			return usageLine(fs, s, "--apply and --apply-sensitive are for a program run in a copy of the current folder: not with --workdir or --no-folder")
		}
	} else if dir, err := os.Getwd(); err == nil {
		o.Folder = dir
	}
	// The process ends right after the run: the kernel's teardown of the
	// sandbox (unmounts, an inotify instance) is left to a child's exit
	// rather than waited for in ours (see package lateclose).
	lateclose.Keep()
	defer lateclose.HandOff()
	// One short process, a few MiB of heap: a collection during the run
	// (one, 1-2 ms of CPU) frees nothing worth it.
	debug.SetGCPercent(400)
	res, folder, err := runExec(ctx, o, s)
	if code, ok := exitInterrupted(ctx, s.err, ""); ok {
		return code
	}
	return execExit(s, o.JSON, res, folder, err)
}

// runExec runs one program and returns its result and, for a program run
// in a copy of the current folder, what became of its changes. Live
// output goes to s unless o.JSON is set.
func runExec(ctx context.Context, o execOptions, s stdio) (sandbox.Result, *folderOutcome, error) {
	if err := checkWorkdir("workdir", o.Workdir); err != nil {
		return sandbox.Result{}, nil, err
	}
	code, language, err := readProgram(o, s.in)
	if err != nil {
		return sandbox.Result{}, nil, err
	}
	res, fin, err := execIn(ctx, o, s, code, language)
	if err != nil || fin == nil {
		fin.close()
		return res, nil, err
	}
	defer fin.close()
	if ctx.Err() != nil { // interrupted: kept, never applied
		fin.keepAs(execTask(o), "program", s)
		return res, nil, nil
	}
	out, err := finishFolder(folderEnd{human: !o.JSON, list: s.err, apply: o.Apply, sensitive: o.ApplySensitive,
		task: execTask(o), success: res.Status == sandbox.StatusOK, what: "program"}, s, fin.dataDir, fin.f, fin.ws)
	return res, out, err
}

// execTask names an exec's kept changes.
func execTask(o execOptions) string { return "codeagent exec " + o.File }

// execIn runs the program code in its workspace: a copy of the current
// folder (returned as fin, which the caller finishes and closes), the
// --workdir, or an empty one.
func execIn(ctx context.Context, o execOptions, s stdio, code []byte, language lang.Language) (sandbox.Result, *folderFinish, error) {
	var err error
	limits := sandbox.DefaultLimits()
	backend := o.Backend
	var m *manifest.Manifest
	if o.Manifest != "" {
		if m, err = manifest.Load(o.Manifest); err != nil {
			return sandbox.Result{}, nil, usageError{err}
		}
		tool, err := m.ToolFor(language.Name)
		if err != nil {
			return sandbox.Result{}, nil, usageError{err}
		}
		limits = tool.Limits(limits)
		if m.Agent.Backend != "" && o.Backend == "" {
			backend = m.Agent.Backend
		}
	}
	limits = limits.Overlay(o.Limits)
	prog := app.Program{Lang: language, Name: programName(o.File, language), Code: code, Args: o.Args, Env: o.Env, Limits: limits}
	if err := prog.Validate(); err != nil {
		return sandbox.Result{}, nil, err
	}
	network, trust, err := o.Net.network(m)
	if err != nil {
		return sandbox.Result{}, nil, err
	}
	depReq, err := o.Deps.request(false, deps.Request{})
	if err != nil {
		return sandbox.Result{}, nil, err
	}
	depReq.CACerts = trust
	if err := checkLanguage(depReq, language.Name); err != nil {
		return sandbox.Result{}, nil, err
	}
	// The workspace first: a refused --workdir, or a folder that cannot be
	// copied, is said before the sandbox starts.
	fin, err := execWorkspace(o, s)
	if err != nil {
		return sandbox.Result{}, nil, err
	}
	ws := fin.ws
	keep := false
	defer func() {
		if !keep {
			fin.close()
		}
	}()
	sb, err := openBackend(backend, o.Backends.options(backends.Options{AllowWeakIsolation: o.AllowWeak, Logger: newLogger(s.err)}))
	if errors.Is(err, backends.ErrUnknown) {
		return sandbox.Result{}, nil, usageError{err}
	}
	if err != nil {
		return sandbox.Result{}, nil, err
	}
	defer sb.Close()

	prog.Network = network
	spec := prog.Spec(ws.Dir)
	if !o.JSON {
		// Like python3's, exec's output is often piped into another
		// program: it passes raw, and is escaped only for a terminal.
		out, flush := liveOutput(s.out)
		defer flush()
		errOut, flushErr := liveOutput(s.err)
		defer flushErr()
		spec.Stdout, spec.Stderr = out, errOut
	}
	if o.File != "-" {
		spec.Stdin = s.in
	}
	if !depReq.Empty() {
		lease, err := execDependencies(ctx, o, s, sb, backend, depReq)
		if err != nil {
			return sandbox.Result{}, nil, err
		}
		defer lease.Release()
		lease.Apply(&spec)
	}
	res, err := sb.Run(ctx, spec)
	if fin.f == nil {
		return res, nil, err
	}
	keep = true
	return res, fin, err
}

// execWorkspace makes exec's workspace: the --workdir, an empty one, or a
// copy of the current folder (fin.f set), with the data directory where
// its changes are kept.
func execWorkspace(o execOptions, s stdio) (*folderFinish, error) {
	fin := &folderFinish{}
	var err error
	if o.Folder != "" {
		dir := ""
		if o.DataDir != nil {
			dir = *o.DataDir
		}
		if fin.dataDir, err = resolveDataDir(dir, os.Getenv); err != nil {
			return nil, err
		}
		if fin.f, err = offerFolder(o.Folder, os.TempDir(), s); err != nil {
			return nil, usageError{err}
		}
	}
	if fin.ws, err = workspace.New(o.Workdir); err != nil {
		if o.Workdir != "" {
			err = usageError{err}
		}
		return nil, err
	}
	if fin.f != nil {
		if err := seedFolder(fin.f, fin.ws, s); err != nil {
			fin.close()
			return nil, fmt.Errorf("copy the current folder: %w", err)
		}
	}
	return fin, nil
}

// execDependencies returns the environment of req, installed first with
// sb when need be, under the data directory.
func execDependencies(ctx context.Context, o execOptions, s stdio, sb sandbox.Sandbox, backend string, req deps.Request) (*deps.Lease, error) {
	dir := ""
	if o.DataDir != nil {
		dir = *o.DataDir
	}
	dataDir, err := resolveDataDir(dir, os.Getenv)
	if err != nil {
		return nil, err
	}
	envs := app.Envs(dataDir, sb, backend, newLogger(s.err))
	if !o.JSON {
		envs.OnInstall = installNotice(s.err)
	}
	return app.EnsureDependencies(ctx, envs, req, nil)
}

// liveOutput is where a program's live output goes: w itself, or an
// escaping writer when w is a terminal, so that the program cannot drive
// the terminal (clipboard writes, cursor moves, a forged verdict line);
// its colours and carriage returns (progress bars) pass, and its last
// colour is reset when it ends (termtext.Program).
func liveOutput(w io.Writer) (io.Writer, func()) {
	if !termtext.IsTerminal(w) {
		return w, func() {}
	}
	tw := termtext.NewProgramWriter(w)
	return tw, func() { _ = tw.Flush() }
}

func readProgram(o execOptions, stdin io.Reader) ([]byte, lang.Language, error) {
	var language lang.Language
	var err error
	switch {
	case o.Lang != "":
		language, err = lang.Lookup(o.Lang)
	case o.File == "-":
		err = errors.New("reading the program from standard input needs --lang")
	default:
		language, err = lang.Detect(o.File)
	}
	if err != nil {
		return nil, language, usageError{err}
	}
	var r io.Reader = stdin
	if o.File != "-" {
		f, err := os.Open(o.File)
		if err != nil {
			return nil, language, usagef("read program: %w", err)
		}
		defer f.Close()
		if fi, err := f.Stat(); err == nil && fi.IsDir() {
			return nil, language, usagef("read program: %s is a directory", o.File)
		}
		r = f
	}
	code, err := io.ReadAll(io.LimitReader(r, maxProgramSize+1))
	if err != nil {
		return nil, language, usagef("read program: %w", err)
	}
	if len(code) > maxProgramSize {
		return nil, language, usagef("program is larger than %s", sandbox.FormatSize(maxProgramSize))
	}
	return code, language, nil
}

var safeName = lazyre.New(`^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$`)

// programName is the program's file name inside the sandbox: the original
// base name when it is plain, so that tracebacks look familiar (with the
// language's extension where its command needs it: go run prog.go).
func programName(file string, l lang.Language) string {
	base := filepath.Base(file)
	if file != "-" && safeName.MatchString(base) {
		if l.NeedsExt && filepath.Ext(base) != l.Ext {
			base = strings.TrimSuffix(base, filepath.Ext(base)) + l.Ext
		}
		return base
	}
	return "main" + l.Ext
}

// execExit prints the outcome and returns the exit status.
func execExit(s stdio, asJSON bool, res sandbox.Result, folder *folderOutcome, err error) int {
	code := res.ExitStatus()
	if code == exitOK && folder != nil && len(folder.Refused) > 0 {
		code = exitFailure // --apply did not apply the changes (said on stderr), as for run
	}
	var setup *sandbox.SetupError
	switch {
	case err == nil:
	case isUsage(err):
		return exitCodeFor(s.err, err)
	case errors.As(err, &setup) || errors.Is(err, sandbox.ErrInvalidSpec):
		res = sandbox.Result{Status: sandbox.StatusSandboxError, Message: err.Error()}
		code = exitSandbox
	default:
		return exitCodeFor(s.err, err)
	}
	if asJSON {
		enc := json.NewEncoder(s.out)
		enc.SetIndent("", "  ")
		_ = enc.Encode(struct {
			sandbox.ResultJSON
			Folder *folderOutcome `json:"folder,omitempty"`
		}{res.JSON(), folder})
		if err != nil {
			printErr(s.err, "%v", err)
		}
		return code
	}
	if err != nil {
		printErr(s.err, "%v", err)
		return code
	}
	if res.StdoutTruncated || res.StderrTruncated {
		fmt.Fprintln(s.err, "codeagent: output truncated at the output limit")
	}
	printRefused(s.err, res.Egress)
	if res.Message != "" && res.Status != sandbox.StatusOK && res.Status != sandbox.StatusError {
		printErr(s.err, "%s", res.Message)
	}
	return code
}
