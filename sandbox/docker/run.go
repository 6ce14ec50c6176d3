package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"

	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/sandbox/internal/backendkit"
	"github.com/codeagent/codeagent/sandbox/internal/diskwatch"
)

// execution is the state of one Run.
type execution struct {
	b    *Backend
	bx   *box
	spec sandbox.Spec
	lim  sandbox.Limits

	mu     sync.Mutex
	reason backendkit.KillReason
	dead   bool          // the container was killed
	killed chan struct{} // closed by the first kill
}

// execute takes a container, stages the workspace and files into it, runs
// the program with exec and brings the workspace back.
func (b *Backend) execute(ctx context.Context, spec sandbox.Spec, lim sandbox.Limits) (sandbox.Result, error) {
	c := classOf(lim, b.cfg)
	bx, err := b.pool.take(ctx, c, spec.Binds)
	if err != nil {
		return sandbox.Result{}, &sandbox.SetupError{Reason: "start a container", Err: err}
	}
	defer b.pool.release(bx)
	uid := -1
	if b.root {
		uid = bx.uid
	}
	// The workspace is opened once without following links, and both
	// copies go through that descriptor: a link a program planted in its
	// path, before or during the run, is refused rather than followed.
	resolved, err := backendkit.ResolveWorkspace(spec.Workspace)
	if err != nil {
		return sandbox.Result{}, &sandbox.SetupError{Reason: "workspace", Err: err}
	}
	wsf, err := sandbox.OpenWorkspace(resolved)
	if err != nil {
		return sandbox.Result{}, &sandbox.SetupError{Reason: "workspace", Err: err}
	}
	defer wsf.Close()
	wsPath := "/proc/self/fd/" + strconv.Itoa(int(wsf.Fd()))
	if err := makeRoom(bx, wsPath); err != nil {
		return sandbox.Result{}, &sandbox.SetupError{Reason: "stage the workspace", Err: err}
	}
	snap, err := stageIn(wsPath, bx.ws, uid)
	if err != nil {
		return sandbox.Result{}, &sandbox.SetupError{Reason: "stage the workspace", Err: err}
	}
	if err := writeFiles(bx.code, spec.Files); err != nil {
		return sandbox.Result{}, &sandbox.SetupError{Reason: "place files", Err: err}
	}
	dl, err := diskLimits(bx, lim)
	if err != nil {
		return sandbox.Result{}, &sandbox.SetupError{Reason: "size the staging file system", Err: err}
	}
	e := &execution{b: b, bx: bx, spec: spec, lim: lim, killed: make(chan struct{})}
	if err := bx.setDeadline(lim.WallTime); err != nil {
		return sandbox.Result{}, &sandbox.SetupError{Reason: "arm the container's deadline", Err: err}
	}
	bx.ran = true
	res, err := e.run(ctx, dl)
	if err != nil {
		return res, err
	}
	var modes map[string]fs.FileMode
	if !b.root {
		e.mu.Lock()
		killed := e.dead
		e.mu.Unlock()
		if modes, err = b.handBack(bx, killed); err != nil {
			return res, &sandbox.SetupError{Reason: "hand the workspace back", Err: err}
		}
		bx.handedBack = true
	}
	snap.budget = &budget{limit: lim.Disk}
	if err := stageOut(bx.ws, wsPath, snap, modes); err != nil {
		return res, &sandbox.CopyBackError{Err: err}
	}
	snap.budget.note(&res, lim)
	return res, nil
}

// command wraps the program: a clean environment (env -i) and the
// per-process limits that the engine does not set per exec (prlimit).
func (e *execution) command() []string {
	cpu := max(uint64(math.Ceil(e.lim.CPUTime.Seconds())), 1)
	cmd := []string{"/usr/bin/env", "-i",
		"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/tmp", "LANG=C.UTF-8", "TMPDIR=/tmp"}
	env := sandbox.WithThreadEnv(e.spec.Env, e.lim.CPUs)
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		cmd = append(cmd, k+"="+env[k])
	}
	cmd = append(cmd, "/usr/bin/prlimit",
		fmt.Sprintf("--cpu=%d:%d", cpu, cpu+1),
		fmt.Sprintf("--fsize=%d", e.lim.FileSize),
		fmt.Sprintf("--nofile=%d", e.lim.OpenFiles),
		"--core=0", "--msgqueue=0", "--")
	return append(cmd, e.spec.Command...)
}

func (e *execution) kill(why backendkit.KillReason) {
	e.mu.Lock()
	first := !e.dead
	if first {
		e.dead = true
		if e.reason == backendkit.NotKilled {
			e.reason = why
		}
		close(e.killed)
	}
	e.mu.Unlock()
	if first {
		e.bx.cg.killAll()
		if err := e.b.kill(e.bx); err != nil {
			e.b.log.Warn("docker: kill container", "id", short(e.bx.id), "err", err)
		}
	}
}

// run execs the program in the container and waits for it, enforcing the
// wall-clock limit, cancellation and the workspace disk limit. Every
// process of the container is gone when it returns.
func (e *execution) run(ctx context.Context, dl diskwatch.Limits) (sandbox.Result, error) {
	var res sandbox.Result
	stopDisk, err := e.watchDisk(dl)
	if err != nil {
		return res, &sandbox.SetupError{Reason: "disk limit", Err: err}
	}
	defer stopDisk()
	cli := e.b.cli
	actx, cancel := context.WithTimeout(context.Background(), apiTimeout)
	defer cancel()
	if err := e.b.openGateway(actx, e.bx, e.spec.Gateway); err != nil { // egress: see package egress
		return res, &sandbox.SetupError{Reason: "network", Err: err}
	}
	ec, err := cli.ExecCreate(actx, e.bx.id, client.ExecCreateOptions{
		User:         e.bx.user,
		AttachStdin:  e.spec.Stdin != nil,
		AttachStdout: true,
		AttachStderr: true,
		WorkingDir:   sandbox.WorkspacePath,
		Cmd:          e.command(),
	})
	if err != nil {
		return res, &sandbox.SetupError{Reason: "create exec", Err: err}
	}
	att, err := cli.ExecAttach(actx, ec.ID, client.ExecAttachOptions{})
	if err != nil {
		return res, &sandbox.SetupError{Reason: "start exec", Err: err}
	}
	defer att.Close()
	start := time.Now()

	stdout := &sandbox.CappedBuffer{Cap: e.lim.Output, Live: e.spec.Stdout, Stream: e.spec.Stream}
	stderr := &sandbox.CappedBuffer{Cap: e.lim.Output, Live: e.spec.Stderr, Stream: e.spec.Stream}
	streamDone := make(chan struct{})
	go func() {
		defer close(streamDone)
		_, _ = stdcopy.StdCopy(stdout, stderr, att.Reader)
	}()
	if e.spec.Stdin != nil {
		go func() {
			_, _ = io.Copy(att.Conn, e.spec.Stdin)
			_ = att.CloseWrite()
		}()
	}

	timer := time.AfterFunc(e.lim.WallTime, func() { e.kill(backendkit.KilledTimeout) })
	defer timer.Stop()
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				e.kill(backendkit.KilledTimeout)
			} else {
				e.kill(backendkit.KilledCancel)
			}
		case <-done:
		}
	}()
	code, err := e.wait(ec.ID, streamDone)
	res.WallTime = time.Since(start)
	if err != nil {
		e.kill(backendkit.KilledCancel)
		return res, &sandbox.SetupError{Reason: "wait for exec", Err: err}
	}
	// The program's process has ended; its children may not have. When the
	// cgroup shows only the idle first process, nothing of the program is
	// left and the container can be removed in the background.
	oom := e.bx.cg.oomKills()
	if e.bx.cg.memory != "" {
		res.CPUTime, res.PeakMemory = e.bx.cg.usage()
	} else {
		res.CPUTime, res.PeakMemory = e.b.stats(e.bx.id)
	}
	if only, ok := e.bx.cg.onlyFirstLeft(); !ok || !only {
		e.kill(backendkit.NotKilled)
	}
	stopDisk()
	select {
	case <-streamDone:
	case <-time.After(2 * time.Second):
		att.Close()
		<-streamDone
	}
	res.Stdout, res.Stderr = stdout.Bytes(), stderr.Bytes()
	res.StdoutTruncated, res.StderrTruncated = stdout.Truncated(), stderr.Truncated()
	e.verdict(&res, code, oom)
	return res, nil
}

// wait returns the exit code of the exec. The stream usually ends when the
// program does, but a child may hold it open, so the exec is also polled,
// at growing intervals, until it is no longer running.
func (e *execution) wait(execID string, streamDone <-chan struct{}) (int, error) {
	delay := 5 * time.Millisecond
	failures := 0
	for {
		select {
		case <-streamDone:
			streamDone = nil
			delay = 2 * time.Millisecond
		case <-e.killed:
			// The container is being killed; the exec ends with it.
		case <-time.After(delay):
			delay = min(2*delay, 100*time.Millisecond)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		ins, err := e.b.cli.ExecInspect(ctx, execID, client.ExecInspectOptions{})
		cancel()
		if err != nil {
			if failures++; failures > 20 {
				return -1, err
			}
			continue
		}
		failures = 0
		if !ins.Running {
			return ins.ExitCode, nil
		}
	}
}

// verdict fills in the status from the exit code and why we killed.
// oomKills is the cgroup's count, or -1 when only the engine's events
// can tell.
func (e *execution) verdict(res *sandbox.Result, code int, oomKills int64) {
	e.mu.Lock()
	reason := e.reason
	e.mu.Unlock()
	oom := oomKills > 0
	if oomKills < 0 {
		oom = e.b.oomKilled(e.bx.id, code == 128+int(syscall.SIGKILL) && reason == backendkit.NotKilled)
	}
	backendkit.Verdict(res, e.lim, reason, oom, code)
}
