package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/codeagent/codeagent/app"
	"github.com/codeagent/codeagent/kernel"
	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/sandbox/backends"
	"github.com/codeagent/codeagent/session"
	"github.com/codeagent/codeagent/store"
	"github.com/codeagent/codeagent/termtext"
	"github.com/codeagent/codeagent/workspace"
)

// replOptions are the inputs of `codeagent repl`.
type replOptions struct {
	Session   string
	DataDir   string
	Workdir   string
	Limits    sandbox.Limits
	Backend   string
	AllowWeak bool
	Backends  *backendFlags // --image and the kubernetes backend's settings
	// The current folder (Folder, "" for none), copied into the
	// workspace; what the cells change is kept or applied at the end.
	Folder         string
	NoFolder       bool
	Apply          bool
	ApplySensitive repeated
}

func cmdRepl(ctx context.Context, s stdio, args []string) int {
	fs := newFlagSet("repl", s)
	fs.Usage = func() {
		fmt.Fprintln(s.err, "usage: codeagent repl [flags]\n\nAn interactive Python in the sandbox whose state is kept between cells\n"+
			"(pandas as pd, numpy as np and matplotlib.pyplot as plt are loaded). The value\nof a cell's last expression is shown; "+
			"figures left open are saved in the\nworkspace as figure-N.png. Ctrl-C interrupts a cell, Ctrl-D quits.\n"+
			"Exit status: 0 on Ctrl-D, 2 for usage errors, 75 when the session is in use by another\n"+
			"process, 125 when the sandbox could not be set up, 1 otherwise (--apply that could\nnot apply the changes too).\n\nflags:")
		printFlags(fs)
	}
	var o replOptions
	fs.StringVar(&o.Session, "session", "", "work in this session's workspace (created if new), as run --session")
	dataDir := dataDirFlag(fs)
	fs.StringVar(&o.Workdir, "workdir", "", "workspace directory, kept afterwards (default: a temporary one, or the session's)")
	durationVar(fs, &o.Limits.WallTime, "timeout", 0, boundProgramTime, "wall-clock limit of each cell (default 30s)")
	sizeVar(fs, &o.Limits.Memory, "memory", boundMemory, "memory limit of the kernel (default 512MiB)")
	fs.BoolVar(&o.NoFolder, "no-folder", false, "start from an empty workspace, not a copy of the current folder")
	fs.BoolVar(&o.Apply, "apply", false, "at the end, apply what the cells changed to the current folder (all or none; else kept)")
	fs.Var(&o.ApplySensitive, "apply-sensitive", "with --apply: apply PATH although its name is refused, as .npmrc (repeatable; never .git)")
	o.Backends = addSandboxFlags(fs, &o.Backend, &o.AllowWeak)
	if code, done := parseFlags(fs, args); done {
		return code
	}
	switch {
	case fs.NArg() != 0:
		return usageLine(fs, s, "repl takes no arguments, got %q", fs.Arg(0))
	case o.Session != "" && o.Workdir != "":
		return usageLine(fs, s, "--session and --workdir: a session has its own workspace, give one of them")
	case (o.Session != "" || o.Workdir != "" || o.NoFolder) && (o.Apply || len(o.ApplySensitive) > 0):
		return usageLine(fs, s, "--apply and --apply-sensitive are for a repl in a copy of the current folder: not with --session, --workdir or --no-folder")
	case o.Session == "" && o.Workdir == "" && !o.NoFolder:
		if dir, err := os.Getwd(); err == nil {
			o.Folder = dir
		}
	}
	o.DataDir = *dataDir
	if err := checkWorkdir("workdir", o.Workdir); err != nil {
		return exitCodeFor(s.err, err)
	}
	err := runRepl(ctx, o, s)
	if code, ok := exitInterrupted(ctx, s.err, ""); ok {
		return code
	}
	return exitCodeFor(s.err, err)
}

// replSession is the repl's hold on its session (with --session): the
// session's lease for the repl's life, and the recorder of its audit log.
type replSession struct {
	st     *store.Store
	run    *session.Run
	folder *folderFinish // the copy of the current folder, when the workspace is one
}

func (r *replSession) close() {
	if r.run != nil {
		r.run.Close()
	}
	if r.st != nil {
		_ = r.st.Close()
	}
}

// replWorkspace is the repl's workspace: the session's (its lease taken
// first), the directory given, or a temporary one.
func replWorkspace(ctx context.Context, o replOptions, s stdio, sb sandbox.Sandbox, log *slog.Logger) (*workspace.Workspace, *replSession, error) {
	rs := &replSession{}
	if o.Session == "" {
		if o.Folder != "" {
			fin, err := execWorkspace(execOptions{Folder: o.Folder, DataDir: &o.DataDir}, s)
			if err != nil {
				return nil, nil, err
			}
			rs.folder = fin
			return fin.ws, rs, nil
		}
		ws, err := workspace.New(o.Workdir)
		if err != nil && o.Workdir != "" {
			err = usageError{err}
		}
		return ws, rs, err
	}
	if err := checkSessionName(o.Session); err != nil {
		return nil, nil, err
	}
	st, dir, err := openDataStore(ctx, o.DataDir)
	if err != nil {
		return nil, nil, err
	}
	rs.st = st
	sess, err := ensureSession(ctx, st, dir, o.Session)
	if err == nil {
		rs.run, err = session.Start(ctx, session.Options{Store: st, Session: sess, Task: "repl", Purpose: "codeagent repl",
			Sandbox: sb, Logger: log})
	}
	var ws *workspace.Workspace
	if err == nil {
		ws, err = openSessionWorkspace(dir, o.Session)
	}
	if err != nil {
		rs.close()
		return nil, nil, err
	}
	return ws, rs, nil
}

func runRepl(ctx context.Context, o replOptions, s stdio) error {
	log := newLogger(s.err)
	sb, err := openBackend(o.Backend, o.Backends.options(backends.Options{AllowWeakIsolation: o.AllowWeak, WarmPython: 1, Logger: log}))
	if errors.Is(err, backends.ErrUnknown) {
		return usageError{err}
	}
	if err != nil {
		return err
	}
	defer sb.Close()
	ws, rs, err := replWorkspace(ctx, o, s, sb, log)
	if err != nil {
		return err
	}
	defer rs.close()
	defer ws.Close()
	err = replIn(ctx, o, s, sb, ws, rs)
	if fin := rs.folder; fin != nil {
		if ctx.Err() != nil {
			fin.keepAs("codeagent repl", "repl", s) // interrupted: kept, never applied
			return err
		}
		out, ferr := finishFolder(folderEnd{human: true, list: s.err, apply: o.Apply, sensitive: o.ApplySensitive,
			task: "codeagent repl", success: err == nil, what: "repl", noAsk: true}, s, fin.dataDir, fin.f, fin.ws)
		if ferr == nil && out != nil && len(out.Refused) > 0 {
			ferr = errNotApplied // as run and exec: exit 1
		}
		err = errors.Join(err, ferr)
	}
	return err
}

// errNotApplied ends a repl whose --apply did not apply its changes
// (each refusal said above; the set is kept).
var errNotApplied = errors.New("--apply did not apply the repl's changes")

// replIn runs the repl's cells in ws until Ctrl-D, its kernel ended and
// the terminal restored when it returns.
func replIn(ctx context.Context, o replOptions, s stdio, sb sandbox.Sandbox, ws *workspace.Workspace, rs *replSession) error {
	var rec *session.Recorder
	if rs.run != nil {
		// In a session, the kernel and each cell are in its audit log.
		rec = rs.run.Rec
		sb = sandbox.Stack(sb, sandbox.Layers{Audit: func(next sandbox.Sandbox) sandbox.Sandbox { return session.Audited(next, rec) }})
	}
	lim := sandbox.Limits{Memory: o.Limits.Memory}
	sess := kernel.NewSession(kernel.Options{Sandbox: sb, Workspace: ws.Dir, Limits: lim})
	defer sess.Close()
	go func() { _ = sess.Start(ctx) }() // while the first cell is typed; it waits for this

	r := &repl{s: s, sess: sess, rec: rec, timeout: o.Limits.WallTime}
	if f, ok := s.in.(*os.File); ok && isTTY(f) {
		restore, err := rawTerminal(int(f.Fd()))
		if err != nil {
			return err
		}
		defer restore()
		bytes := make(chan byte, 4096)
		go readBytes(f, bytes)
		r.keys = &byteSource{ch: bytes}
		r.ed = &editor{keys: keyReader{src: r.keys}, out: s.err}
	}
	note := "removed at exit: use --session NAME or --workdir DIR to keep it"
	switch {
	case rs.folder != nil:
		note = "a copy of " + rs.folder.f.Dir + ": what the cells change is listed at the end, and kept or applied (--apply)"
	case !ws.Temporary():
		note = "kept"
	}
	fmt.Fprintf(s.err, "codeagent repl: Python in the sandbox, state kept between cells; workspace %s (%s). Ctrl-D quits.\n",
		termtext.Name(ws.Dir), note)
	return r.loop(ctx)
}

// readBytes copies f into ch until it ends.
func readBytes(f *os.File, ch chan<- byte) {
	defer close(ch)
	buf := make([]byte, 256)
	for {
		n, err := f.Read(buf)
		for _, b := range buf[:n] {
			ch <- b
		}
		if err != nil {
			return
		}
	}
}

// repl reads cells and runs them.
type repl struct {
	s       stdio
	sess    *kernel.Session
	rec     *session.Recorder // nil outside a session
	timeout time.Duration
	ed      *editor     // nil when stdin is not a terminal
	keys    *byteSource // the terminal's bytes, with ed
	lines   *bufio.Scanner
}

func (r *repl) loop(ctx context.Context) error {
	if r.ed == nil {
		r.lines = bufio.NewScanner(r.s.in)
		r.lines.Buffer(make([]byte, 64<<10), kernel.MaxCode)
	}
	for ctx.Err() == nil {
		code, err := r.readCell()
		if err == io.EOF {
			return nil
		}
		if err == errAbandon {
			continue
		}
		if err != nil {
			return err
		}
		if strings.TrimSpace(code) == "" {
			continue
		}
		if err := r.runCell(ctx, code); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// readCell reads lines until they make a cell (see cellComplete).
func (r *repl) readCell() (string, error) {
	var lines []string
	for {
		prompt := ">>> "
		if len(lines) > 0 {
			prompt = "... "
		}
		var line string
		if r.ed != nil {
			l, err := r.ed.readLine(prompt)
			if err == io.EOF && len(lines) > 0 {
				return strings.Join(lines, "\n"), nil
			}
			if err != nil {
				return "", err
			}
			line = l
		} else {
			if !r.lines.Scan() {
				if err := r.lines.Err(); err != nil {
					return "", err
				}
				if len(lines) > 0 {
					return strings.Join(lines, "\n"), nil
				}
				return "", io.EOF
			}
			line = r.lines.Text()
		}
		lines = append(lines, line)
		if cellComplete(lines) {
			return strings.Join(lines, "\n"), nil
		}
	}
}

// runCell runs code and shows what became of it: output as it comes, then
// the value and displays, figures saved, and the kernel's fate.
func (r *repl) runCell(ctx context.Context, code string) error {
	// A cell follows every door's rules (app.CellRequest): one refused is
	// said, and the next is read.
	if err := (app.CellRequest{Language: "python", Code: code, Limits: sandbox.Limits{WallTime: r.timeout}}).Validate(); err != nil {
		printErr(r.s.err, "%v", err)
		return nil
	}
	out, flushOut := liveOutput(r.s.out)
	errOut, flushErr := liveOutput(r.s.err)
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type answer struct {
		res kernel.Result
		err error
	}
	done := make(chan answer, 1)
	go func() {
		var res kernel.Result
		_, err := r.rec.Cell(code, r.timeout, func() (sandbox.Result, error) {
			var err error
			res, err = r.sess.Exec(cctx, kernel.Cell{Code: code, Timeout: r.timeout, OnOutput: func(stream string, data []byte) {
				if stream == "stderr" {
					_, _ = errOut.Write(data)
				} else {
					_, _ = out.Write(data)
				}
			}})
			return res.Result, err
		})
		done <- answer{res, err}
	}()
	var a answer
	if r.keys == nil {
		a = <-done
	} else {
	wait: // Ctrl-C interrupts the cell; other keys wait for the prompt
		for {
			select {
			case a = <-done:
				break wait
			case b, ok := <-r.keys.ch:
				if !ok {
					a = <-done
					break wait
				}
				if b == 3 {
					io.WriteString(r.s.err, "^C\n")
					cancel()
				} else if len(r.keys.pending) < 4096 {
					r.keys.pending = append(r.keys.pending, b)
				}
			}
		}
	}
	flushOut()
	flushErr()
	if a.err != nil {
		var se *sandbox.SetupError
		if errors.As(a.err, &se) || ctx.Err() != nil {
			return a.err
		}
		printErr(r.s.err, "%v", a.err)
		return nil
	}
	r.show(a.res)
	return nil
}

func (r *repl) show(res kernel.Result) {
	note := func(format string, args ...any) {
		fmt.Fprintf(r.s.err, "[%s]\n", termtext.Name(fmt.Sprintf(format, args...)))
	}
	if res.KernelRestarted {
		note("the kernel had ended (%s): this cell ran in a fresh one, without the earlier state", res.RestartReason)
	}
	for _, d := range res.Display {
		switch {
		case d.Kind == "figure" && d.File != "":
			note("figure saved as %s", d.File)
		case d.Kind == "figure":
			note("a figure could not be saved")
		default:
			text := d.Data["text/plain"]
			if termtext.IsTerminal(r.s.out) {
				text = termtext.Text(text)
			}
			fmt.Fprintln(r.s.out, text)
		}
	}
	if res.Dropped > 0 {
		note("%d displays left out for their size", res.Dropped)
	}
	switch {
	case res.KernelDied:
		note("%s", res.Message)
	case res.Status == sandbox.StatusTimeout || res.Status == sandbox.StatusSignaled:
		note("%s", res.Message)
	case res.Status == sandbox.StatusError && res.ErrorName == "" && res.ExitCode != 0:
		note("the cell exited with status %d; the kernel's state is kept", res.ExitStatus())
	}
}
