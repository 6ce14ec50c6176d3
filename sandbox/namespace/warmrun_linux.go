//go:build linux && (amd64 || arm64)

// This file is the warm interpreters' (see warm_linux.go): it runs an
// execution in a warm interpreter that package warm's pool hands out, for
// the programs warm.Args lets run warm. It uses the isolation code as a
// cold run does: the workspace as an overlay, a synced copy or an idmapped
// bind (overlay, synced, idmapWorkspace, guard), the mounts into the
// sandbox (warmmount_linux.go), the execution's cgroup limits and rlimits
// (set as the sandbox's uid, asUID), the disk watcher, the run's kill
// watch, the verdict, and the merge of the upper layer.

package namespace

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/sandbox/internal/backendkit"
	"github.com/codeagent/codeagent/sandbox/internal/diskwatch"
	"github.com/codeagent/codeagent/sandbox/namespace/internal/warm"
)

// warmArgs returns the interpreter's arguments when spec can run in a warm
// interpreter (warm.Args): only with the pool, which needs root and
// cgroups.
func (b *Backend) warmArgs(spec sandbox.Spec, lim sandbox.Limits) ([]string, bool) {
	if b.warm == nil || !b.asRoot() || b.cgroups == nil {
		return nil, false
	}
	return warm.Args(spec, lim, environ)
}

// runWarm runs spec in a warm interpreter when it can; ok false means the
// caller runs it cold (nothing of it has run).
func (b *Backend) runWarm(ctx context.Context, spec sandbox.Spec, lim sandbox.Limits) (res sandbox.Result, ok bool, err error) {
	args, eligible := b.warmArgs(spec, lim)
	if !eligible {
		return res, false, nil
	}
	wsDir, err := backendkit.ResolveWorkspace(spec.Workspace)
	if err != nil {
		return res, false, nil // the cold path reports it
	}
	wsFile, err := sandbox.OpenWorkspace(wsDir)
	if err != nil {
		return res, false, nil
	}
	defer wsFile.Close()
	for _, name := range warm.StartupFiles() {
		var st unix.Stat_t
		if unix.Fstatat(int(wsFile.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
			return res, false, nil // the stack reads it at import, from the working directory
		}
	}
	w, taken := b.warm.Take()
	if !taken {
		return res, false, nil
	}
	r := &run{b: b, spec: spec, lim: lim}
	r.initFD.Store(int64(w.pidfd))
	res, err = r.executeWarm(ctx, w, args, wsDir, wsFile)
	if errors.Is(err, errWarmUnusable) {
		b.log.Debug("warm interpreter not usable, running cold", "err", err)
		return res, false, nil
	}
	b.warm.Ran()
	if err != nil {
		res.Status = sandbox.StatusSandboxError
		res.Message = err.Error()
	}
	return res, true, err
}

// errWarmUnusable wraps failures before the program started: the run
// falls back to a cold sandbox.
var errWarmUnusable = errors.New("warm interpreter unusable")

func unusable(err error) error { return errors.Join(errWarmUnusable, err) }

// executeWarm hands the execution to w and waits for it, as execute does
// for a cold sandbox.
func (r *run) executeWarm(ctx context.Context, w *warmInterp, args []string, wsDir string, wsFile *os.File) (sandbox.Result, error) {
	var res sandbox.Result
	b, l := r.b, w.l
	defer b.background(func() {
		w.Discard()
		b.warm.Fill()
	})
	var wsSt unix.Stat_t
	if err := unix.Fstat(int(wsFile.Fd()), &wsSt); err != nil {
		return res, unusable(err)
	}
	b.noteOwner(&wsSt)
	// As for a cold run, the workspace is an overlay when overlays are on:
	// made in the launcher's mount namespace, then moved into the
	// sandbox's; else the workspace itself, idmapped.
	sw, dl, err := r.synced(l, wsFile, &wsSt)
	var up *upperFS
	if err == nil && sw == nil {
		up, dl, err = r.overlay(l, wsFile, &wsSt)
	}
	if err != nil {
		return res, unusable(err)
	}
	wsTree, watched := -1, wsDir
	switch {
	case sw != nil:
		defer sw.close()
		wsTree, err = cloneMount(l.cmd.Process.Pid, b.mountPoint())
		watched = sw.up.watchPath()
		if err == nil {
			if err = sw.freezeWith(l.cg, w.childPid); err == nil {
				err = sw.cg.JoinFreezer(w.progPid)
			}
		}
	case up != nil:
		defer b.unregister(up)
		wsTree, err = cloneMount(l.cmd.Process.Pid, b.mountPoint())
		watched = up.watchPath()
	default:
		if wsTree, err = cloneWorkspace(wsFile, 0, false); err == nil {
			err = b.idmapWorkspace(wsTree, &wsSt, l.uid)
		}
		defer b.guard(wsFile)()
	}
	if wsTree >= 0 {
		defer unix.Close(wsTree)
	}
	if err != nil {
		return res, unusable(err)
	}
	code, err := codeMount(r.spec.Files)
	if err != nil {
		return res, unusable(err)
	}
	err = mountInto(w.childPid, sandboxMounts{wsTree: wsTree, code: code, codePath: "/code",
		tmpSize: r.lim.Disk, shmSize: min(r.lim.Disk, r.lim.Memory)})
	unix.Close(code)
	if err != nil {
		return res, unusable(err)
	}
	// The program's memory limit counts what the interpreter holds: it
	// must leave room for the program.
	if f, ok := filesOf(l.cg); !ok || !warm.LeavesRoom(readInt(f.usage), r.lim.Memory) {
		return res, unusable(errors.New("the interpreter holds most of the memory limit"))
	}
	if err := l.cg.SetLimits(cgroupLimitsOf(r.lim)); err != nil {
		return res, unusable(err)
	}
	restartPeak(l.cg)
	baseCPU := l.cg.Stats().CPUTime
	// RLIMIT_CPU counts the process's whole life in whole seconds: the
	// program gets its CPU time on top of the imports', and less than a
	// second more, never less.
	lim := r.lim
	used := processCPU(w.progPid).Seconds()
	lim.CPUTime = time.Duration(math.Ceil(used+r.lim.CPUTime.Seconds())) * time.Second
	if err := asUID(l.uid, func() error { return setRlimits(w.progPid, lim, false) }); err != nil {
		return res, unusable(err)
	}
	ws, err := diskwatch.Start(watched, dl, func() { r.kill(l, backendkit.KilledDisk) })
	if err != nil {
		return res, &sandbox.SetupError{Reason: "measure workspace", Err: err}
	}
	defer ws.Stop()
	req, err := warm.Request(args, environ(sandbox.WithThreadEnv(r.spec.Env, r.lim.CPUs)), sandbox.WorkspacePath)
	if err != nil {
		return res, unusable(err)
	}
	stdout := &sandbox.CappedBuffer{Cap: r.lim.Output, Live: r.spec.Stdout, Stream: r.spec.Stream}
	stderr := &sandbox.CappedBuffer{Cap: r.lim.Output, Live: r.spec.Stderr, Stream: r.spec.Stream}
	drained := l.collect(stdout, stderr)

	start := time.Now()
	go warm.Send(w.stdin, req, r.spec.Stdin)
	stopWatch := r.watch(ctx, l)
	if sw != nil {
		sw.watch = ws
	}
	if r.spec.Started != nil {
		if h := (running{cg: l.cg, baseCPU: baseCPU, ws: ws}); sw != nil {
			r.spec.Started(syncedRunning{h, sw})
		} else {
			r.spec.Started(h)
		}
	}
	<-w.exited
	stopWatch()
	if ws.Stop() {
		r.setReason(backendkit.KilledDisk)
	}
	res.WallTime = time.Since(start)
	drained(2 * time.Second)

	res.Stdout, res.Stderr = stdout.Bytes(), stderr.Bytes()
	res.StdoutTruncated, res.StderrTruncated = stdout.Truncated(), stderr.Truncated()
	ps := l.cmd.ProcessState
	stats := l.cg.Stats()
	stats.CPUTime = max(stats.CPUTime-baseCPU, 0)
	if stats.PeakMemory == 0 && ps != nil {
		if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
			stats.PeakMemory = ru.Maxrss * 1024
		}
	}
	res.CPUTime, res.PeakMemory = stats.CPUTime, stats.PeakMemory
	r.verdict(&res, ps, w.waitErr, stats)
	if sw != nil {
		// Every process of the sandbox is gone: the copy is final.
		if err := sw.end(); err != nil {
			return res, &sandbox.CopyBackError{Err: err}
		}
	}
	if up != nil {
		// Every process of the sandbox is gone: the upper layer is final.
		if err := mergeUpper(up.upper, wsFile); err != nil {
			return res, &sandbox.SetupError{Reason: "bring the workspace up to date with what the program wrote", Err: err}
		}
	}
	return res, nil
}

// cloneMount returns a detached copy of the mount at path in the mount
// namespace of process pid.
func cloneMount(pid int, path string) (int, error) {
	tree := -1
	err := inMountNamespace(pid, func() error {
		fd, err := unix.OpenTree(unix.AT_FDCWD, path, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
		if err != nil {
			return fmt.Errorf("clone the overlay: %w", err)
		}
		tree = fd
		return nil
	})
	return tree, err
}

// processCPU is the CPU time process pid has used, all its threads.
func processCPU(pid int) time.Duration {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 {
		s = s[i+1:]
	}
	f := strings.Fields(s) // from the state: utime and stime are the 12th and 13th
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	k, _ := strconv.ParseInt(f[12], 10, 64)
	const hz = 100 // USER_HZ on Linux
	return time.Duration(math.Round(float64(u+k) * float64(time.Second) / hz))
}
