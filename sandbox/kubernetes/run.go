package kubernetes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/sandbox/internal/backendkit"
)

// errBroken marks a failure of a box before its program started: Run
// tries another box.
var errBroken = errors.New("sandbox Pod unusable")

// execution is the state of one Run.
type execution struct {
	b    *Backend
	bx   *box
	spec sandbox.Spec
	lim  sandbox.Limits

	mu     sync.Mutex
	reason backendkit.KillReason
	killed bool
}

// take returns a box for a run: from the pool, or for a spec with binds
// one made for it.
func (b *Backend) take(ctx context.Context, c class, binds []sandbox.Bind) (*box, error) {
	if len(binds) == 0 {
		return b.pool.take(ctx, c)
	}
	ctx, cancel := context.WithTimeout(ctx, b.cfg.StartTimeout)
	defer cancel()
	return b.createBoxWith(ctx, c, binds)
}

// execute runs spec in a box, trying another when one fails before its
// program started.
func (b *Backend) execute(ctx context.Context, spec sandbox.Spec, lim sandbox.Limits) (sandbox.Result, error) {
	c := classOf(lim)
	var last error
	for try := 0; try < 3; try++ {
		bx, err := b.take(ctx, c, spec.Binds)
		if err != nil {
			return sandbox.Result{}, &sandbox.SetupError{Reason: "start a sandbox Pod", Err: err}
		}
		e := &execution{b: b, bx: bx, spec: spec, lim: lim}
		res, err := e.run(ctx)
		b.pool.release(bx)
		if !errors.Is(err, errBroken) {
			return res, err
		}
		last = err
		b.log.Warn("kubernetes: a sandbox Pod failed before its program started; trying another", "pod", bx.name, "err", err)
		if ctx.Err() != nil {
			break
		}
	}
	return sandbox.Result{}, &sandbox.SetupError{Reason: "sandbox Pod", Err: last}
}

// command is the program's argv: a clean environment (env -i) and the
// per-process limits no Pod field sets (prlimit), as in the Docker backend.
func (e *execution) command() []string {
	cpu := max(uint64(math.Ceil(e.lim.CPUTime.Seconds())), 1)
	cmd := []string{"/usr/bin/env", "-i", "PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/tmp", "LANG=C.UTF-8", "TMPDIR=/tmp"}
	env := sandbox.WithThreadEnv(e.spec.Env, e.lim.CPUs)
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		cmd = append(cmd, k+"="+env[k])
	}
	cmd = append(cmd, "/usr/bin/prlimit", fmt.Sprintf("--cpu=%d:%d", cpu, cpu+1), fmt.Sprintf("--fsize=%d", e.lim.FileSize),
		fmt.Sprintf("--nofile=%d", e.lim.OpenFiles), "--core=0", "--msgqueue=0", "--")
	return append(cmd, e.spec.Command...)
}

// argv encodes cmd for the program's wrapper.
func argv(cmd []string) []byte {
	b := []byte(strconv.Itoa(len(cmd)) + "\n")
	for _, a := range cmd {
		b = append(append(b, a...), 0)
	}
	return b
}

// kill asks the agent to end the program, once.
func (e *execution) kill(why backendkit.KillReason) {
	e.mu.Lock()
	first := !e.killed
	if first {
		e.killed, e.reason = true, why
	}
	e.mu.Unlock()
	if first {
		_ = e.bx.agent.send(frameKill, []byte("kill"))
	}
}

func (e *execution) killReason() backendkit.KillReason {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.reason
}

// run stages the workspace, starts the program, waits for it within the
// limits and copies the workspace back.
func (e *execution) run(ctx context.Context) (sandbox.Result, error) {
	var res sandbox.Result
	bx := e.bx
	if bx.dead() {
		return res, fmt.Errorf("%w: a stream ended while idle", errBroken)
	}
	go func() {
		dctx, cancel := context.WithTimeout(context.Background(), apiTimeout)
		defer cancel()
		if err := e.b.setDeadline(dctx, bx, e.lim.WallTime); err != nil {
			e.b.log.Warn("kubernetes: lower the Pod's deadline", "pod", bx.name, "err", err)
		}
	}()
	resolved, err := backendkit.ResolveWorkspace(e.spec.Workspace)
	if err != nil {
		return res, &sandbox.SetupError{Reason: "workspace", Err: err}
	}
	wsf, err := sandbox.OpenWorkspace(resolved)
	if err != nil {
		return res, &sandbox.SetupError{Reason: "workspace", Err: err}
	}
	defer wsf.Close()
	wsPath := "/proc/self/fd/" + strconv.Itoa(int(wsf.Fd()))
	hdr := agentHeader{Disk: e.lim.Disk, DeadlineMS: (e.lim.WallTime + deadlineGrace).Milliseconds(), PollMS: 50,
		Cap: e.lim.Disk + e.lim.FileSize}
	if err := bx.agent.sendJSON(frameHeader, hdr); err != nil {
		return res, fmt.Errorf("%w: %v", errBroken, err)
	}
	t0 := time.Now()
	staged, err := stageIn(bx.agent, wsPath, e.spec.Files)
	if err != nil {
		return res, fmt.Errorf("%w: stage the workspace: %v", errBroken, err)
	}
	if f, err := e.next(ctx, e.b.cfg.StartTimeout); err != nil || f.t != frameBegin {
		return res, fmt.Errorf("%w: the agent did not stage the workspace: %v %s", errBroken, err, f.p)
	}
	stdout := &sandbox.CappedBuffer{Cap: e.lim.Output, Live: e.spec.Stdout, Stream: e.spec.Stream}
	stderr := &sandbox.CappedBuffer{Cap: e.lim.Output, Live: e.spec.Stderr, Stream: e.spec.Stream}
	bx.progOut.set(stdout)
	bx.progErr.set(stderr)
	start := time.Now()
	if _, err := bx.progIn.Write(argv(e.command())); err != nil {
		return res, fmt.Errorf("%w: start the program: %v", errBroken, err)
	}
	if e.spec.Stdin != nil {
		go func() {
			_, _ = io.Copy(bx.progIn, e.spec.Stdin)
			_ = bx.progIn.Close()
		}()
	} else {
		_ = bx.progIn.Close()
	}
	timer := time.AfterFunc(e.lim.WallTime, func() { e.kill(backendkit.KilledTimeout) })
	defer timer.Stop()
	stop := context.AfterFunc(ctx, func() {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			e.kill(backendkit.KilledTimeout)
		} else {
			e.kill(backendkit.KilledCancel)
		}
	})
	defer stop()
	code, err := e.waitProgram()
	res.WallTime = time.Since(start)
	if err != nil {
		return res, &sandbox.SetupError{Reason: "the program's exec", Err: err}
	}
	t1 := time.Now()
	end, cb, err := e.collect(wsPath, staged)
	if err != nil {
		return res, &sandbox.SetupError{Reason: "bring the workspace back", Err: err}
	}
	bx.progOut.set(nil)
	bx.progErr.set(nil)
	res.Stdout, res.Stderr = stdout.Bytes(), stderr.Bytes()
	res.StdoutTruncated, res.StderrTruncated = stdout.Truncated(), stderr.Truncated()
	res.CPUTime, res.PeakMemory = time.Duration(end.CPU), end.Peak
	reason := e.killReason()
	switch {
	case reason != backendkit.NotKilled:
	case end.Reason == "disk":
		reason = backendkit.KilledDisk
	case end.Reason == "deadline":
		reason = backendkit.KilledTimeout
	}
	oom := end.OOM > 0 || end.OOM < 0 && code == 137 && reason == backendkit.NotKilled
	backendkit.Verdict(&res, e.lim, reason, oom, code)
	cb.note(&res, e.lim)
	e.b.log.Debug("kubernetes: run", "pod", bx.name, "staging", start.Sub(t0), "program", t1.Sub(start),
		"copy back", time.Since(t1), "end", end.Reason)
	return res, nil
}

// waitProgram waits for the program's exec to end. When the agent was
// asked to kill and the exec still runs after a grace, the Pod is deleted.
func (e *execution) waitProgram() (int, error) {
	bx := e.bx
	var backstop <-chan time.Time
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-bx.progDone:
			return exitCode(bx.exit())
		case <-bx.gone:
			return -1, errors.New("the Pod was deleted or ended during the run")
		case <-tick.C:
			e.mu.Lock()
			killed := e.killed
			e.mu.Unlock()
			if killed && backstop == nil {
				// The agent may be gone (the program can kill it): another
				// one ends the program.
				if bx.dead() {
					go e.recoverKill()
				}
				backstop = time.After(5 * time.Second)
			}
		case <-backstop:
			e.b.log.Warn("kubernetes: the program outlived its kill; deleting its Pod", "pod", bx.name)
			ctx, cancel := context.WithTimeout(context.Background(), apiTimeout)
			_ = e.b.deletePod(ctx, bx.name)
			cancel()
			backstop = time.After(time.Hour)
			go func() {
				time.Sleep(10 * time.Second)
				bx.cancel()
			}()
		}
	}
}

// recoverKill starts an agent that kills every process of the Pod.
func (e *execution) recoverKill() {
	ch, _ := e.recoverAccount()
	for range ch {
	}
}

// next returns the agent's next frame within d.
func (e *execution) next(ctx context.Context, d time.Duration) (frame, error) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case f, ok := <-e.bx.frames:
		if !ok {
			return frame{}, fmt.Errorf("the agent ended: %s", e.bx.agentLog.Bytes())
		}
		if f.t == frameError {
			return f, fmt.Errorf("agent: %s", f.p)
		}
		return f, nil
	case <-t.C:
		return frame{}, errors.New("the agent did not answer")
	case <-ctx.Done():
		return frame{}, ctx.Err()
	}
}

// collect reads the agent's end of run and its account of the workspace,
// and applies it to the workspace. When the agent is gone (the program
// killed it), another one is started to give the account.
func (e *execution) collect(wsPath string, staged map[string]bool) (agentEnd, *copyBack, error) {
	var end agentEnd
	root, err := os.OpenRoot(wsPath)
	if err != nil {
		return end, nil, fmt.Errorf("open workspace: %w", err)
	}
	defer root.Close()
	cb, err := newCopyBack(root, staged, e.lim.Disk)
	if err != nil {
		return end, nil, err
	}
	frames := e.bx.frames
	f, err := e.next(context.Background(), 10*time.Second)
	if err != nil || f.t != frameEnd {
		e.b.log.Debug("kubernetes: the agent is gone; starting another to bring the workspace back", "pod", e.bx.name, "err", err)
		if frames, err = e.recoverAccount(); err != nil {
			return end, cb, err
		}
		f = <-frames
		if f.t != frameEnd {
			return end, cb, fmt.Errorf("the agent sent %q before its end of run", f.t)
		}
	}
	if err := json.Unmarshal(f.p, &end); err != nil {
		return end, cb, fmt.Errorf("the agent's end of run: %w", err)
	}
	timeout := time.NewTimer(apiTimeout + time.Duration(e.lim.Disk>>20)*100*time.Millisecond)
	defer timeout.Stop()
	for {
		var f frame
		var ok bool
		select {
		case f, ok = <-frames:
		case <-timeout.C:
			return end, cb, errors.New("the workspace did not come back in time")
		}
		if !ok {
			return end, cb, errors.New("the agent ended before the workspace was complete")
		}
		switch f.t {
		case frameDone:
			return end, cb, cb.finish()
		case frameError:
			return end, cb, fmt.Errorf("agent: %s", f.p)
		}
		if err := cb.apply(f); err != nil {
			return end, cb, fmt.Errorf("the workspace's account: %w", err)
		}
	}
}

// recoverAccount starts an agent in recovery mode, which kills what is
// left, and returns its frames.
func (e *execution) recoverAccount() (chan frame, error) {
	ch := make(chan frame, 64)
	outR, outW := io.Pipe()
	hdr, _ := json.Marshal(agentHeader{Cap: e.lim.Disk + e.lim.FileSize})
	var in []byte
	in = append(in, frameHeader)
	in = append(in, be32(uint32(len(hdr)))...)
	in = append(in, hdr...)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), apiTimeout+time.Duration(e.lim.Disk>>20)*100*time.Millisecond)
		defer cancel()
		err := e.b.stream(ctx, e.bx.name, []string{"python3", "-I", "-S", "-c", agentSource, "-", "recover"},
			bytesReader(string(in)), outW, io.Discard)
		_ = outW.CloseWithError(errOr(err, io.EOF))
	}()
	go readFrames(outR, ch)
	return ch, nil
}

func bytesReader(s string) io.Reader { return strings.NewReader(s) }

func errOr(err, def error) error {
	if err != nil {
		return err
	}
	return def
}
