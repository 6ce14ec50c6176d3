//go:build linux && (amd64 || arm64)

// This file, warmmount_linux.go and warmrun_linux.go are the warm
// interpreters' (Config.WarmPython) part that needs the isolation code;
// the rest (the pool, which programs run warm, the loader warm.py and its
// protocol) is package warm, which decides and keeps but never touches a
// sandbox or the host itself. This file starts an interpreter's sandbox
// (for warm.Pool's Start): it uses the launcher (bwrap, seccomp, the
// sandbox's host uid), its cgroup and id maps, asUID and prlimit for the
// warm-up's rlimits, and /proc to find the interpreter.

package namespace

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/sandbox/namespace/internal/warm"
)

// A Python program spends most of a fresh sandbox's time importing pandas,
// numpy and matplotlib and, at exit, tearing them down again. A warm
// interpreter is a sandbox that is already fully set up (namespaces,
// mounts, seccomp, its cgroup) and whose python3 has imported the
// scientific stack, but that has no workspace yet: it waits for one
// request on its stdin (internal/warm/warm.py). For an execution the
// backend, as root, attaches the workspace and the execution's files into
// the sandbox's mount namespace (open_tree, setns and move_mount from a
// thread that then ends, as for launchers), resizes /tmp and /dev/shm,
// sets the cgroup limits and rlimits (RLIMIT_CPU counts on from the CPU
// the imports used), and writes the program's arguments and environment;
// the interpreter changes into /workspace and runs the program as
// __main__. Each warm interpreter serves one execution and is then
// destroyed, like every sandbox. Unprivileged, the backend cannot enter a
// sandbox's mount namespace, and runs every program cold.

// warmInterp is one warm interpreter: a sandbox started by a launcher.
type warmInterp struct {
	l        *launcher
	childPid int // the sandbox's first process (bwrap's init)
	progPid  int // the interpreter
	pidfd    int
	stdin    *io.PipeWriter // the request, then the program's stdin
	exited   chan struct{}  // closed when bwrap has exited
	waitErr  error
	startCPU time.Duration // the CPU time the imports used
}

// StartCPU implements warm.Interp.
func (w *warmInterp) StartCPU() time.Duration { return w.startCPU }

var _ warm.Interp = (*warmInterp)(nil)

// Exited implements warm.Interp.
func (w *warmInterp) Exited() bool {
	select {
	case <-w.exited:
		return true
	default:
		return false
	}
}

// Discard implements warm.Interp: it ends the interpreter and removes its
// cgroup.
func (w *warmInterp) Discard() {
	_ = w.stdin.CloseWithError(io.ErrClosedPipe)
	if w.pidfd >= 0 {
		_ = unix.PidfdSendSignal(w.pidfd, unix.SIGKILL, nil, 0)
	}
	_ = w.l.cmd.Process.Kill()
	<-w.exited
	if w.pidfd >= 0 {
		_ = unix.Close(w.pidfd)
		w.pidfd = -1
	}
	w.l.discard()
}

// warmPool keeps Config.WarmPython interpreters ready.
type warmPool = warm.Pool[*warmInterp]

// newWarmPool returns the pool of Config.WarmPython interpreters.
func newWarmPool(b *Backend, size int) *warmPool {
	return warm.NewPool(warm.PoolConfig[*warmInterp]{Size: size, Start: b.startWarm, Background: b.background, Log: b.log})
}

// warmPythonSize is Config.WarmPython, sized to the machine when negative
// (warm.SizeFor).
func warmPythonSize(n int) int {
	if n >= 0 {
		return n
	}
	return warm.SizeFor(runtime.NumCPU(), memAvailable())
}

// memAvailable is the kernel's estimate of the memory available for new
// work (MemAvailable in /proc/meminfo), 0 when unknown.
func memAvailable() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "MemAvailable:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// setWarmRlimits bounds the warm-up of pid by lim's soft limits but keeps
// the hard limits it inherited: the execution's own limits (setRlimits on
// the interpreter) are then set by its uid, which may lower a hard limit
// but never raise it, before the program runs. Core dumps and message
// queues are off from the start.
func setWarmRlimits(pid int, lim sandbox.Limits) error {
	soft := map[int]uint64{unix.RLIMIT_CPU: uint64(lim.CPUTime.Seconds()), unix.RLIMIT_FSIZE: uint64(lim.FileSize),
		unix.RLIMIT_NOFILE: uint64(lim.OpenFiles), unix.RLIMIT_CORE: 0, unix.RLIMIT_MSGQUEUE: 0}
	for res, cur := range soft {
		var rl unix.Rlimit
		if err := unix.Prlimit(pid, res, nil, &rl); err != nil {
			return fmt.Errorf("get rlimit %d: %w", res, err)
		}
		rl.Cur = min(cur, rl.Max)
		if res == unix.RLIMIT_CORE || res == unix.RLIMIT_MSGQUEUE {
			rl.Max = 0
		}
		if err := unix.Prlimit(pid, res, &rl, nil); err != nil {
			return fmt.Errorf("set rlimit %d: %w", res, err)
		}
	}
	return nil
}

// WarmRuns reports how many executions ran in a warm interpreter.
func (b *Backend) WarmRuns() int64 {
	if b.warm == nil {
		return 0
	}
	return b.warm.Runs()
}

// startWarm starts a warm interpreter and waits until it has imported the
// stack.
func (b *Backend) startWarm() (*warmInterp, error) {
	spec := warm.Spec()
	lim := warm.Limits()
	l, err := b.newLauncher(spec)
	if err != nil {
		return nil, err
	}
	pr, pw := io.Pipe()
	w := &warmInterp{l: l, pidfd: -1, stdin: pw, exited: make(chan struct{})}
	fail := func(err error) (*warmInterp, error) {
		_ = pw.CloseWithError(io.ErrClosedPipe)
		_ = l.cmd.Process.Kill()
		if w.pidfd >= 0 {
			_ = unix.Close(w.pidfd)
		}
		l.discard()
		return nil, err
	}
	if l.cg != nil {
		// The imports run behind every execution (the execution's limits
		// restore the default weight, see executeWarm).
		cl := cgroupLimitsOf(lim)
		cl.Weight = warmUpWeight
		if err := l.cg.SetLimits(cl); err != nil {
			return fail(err)
		}
	}
	// The workspace is an empty root-owned directory until the execution's
	// is mounted over it.
	tmp := b.tmpFilesFor(spec)
	l.start(bwrapOptions(b.layout, spec, lim, b.mnt+"/empty", true, tmp, nil), b.seccomp, spec.Files, tmp, pr)
	childPid, err := l.childPid()
	if err != nil {
		return fail(err)
	}
	w.childPid = childPid
	if fd, err := unix.PidfdOpen(childPid, 0); err == nil {
		w.pidfd = fd
	}
	l.holdNamespaces(childPid)
	err = l.mapIDs(childPid, l.uid, true)
	if err == nil {
		err = joinCgroup(childPid, l.cg) // bwrap may have forked it before its own move was done
	}
	if err == nil {
		err = asUID(l.uid, func() error { return setWarmRlimits(childPid, lim) })
	}
	if err == nil {
		_, err = l.blockW.Write([]byte{0})
	}
	_ = l.blockW.Close()
	if err != nil {
		return fail(fmt.Errorf("set up: %w", err))
	}
	go func() {
		w.waitErr = l.cmd.Wait()
		close(w.exited)
	}()
	if err := warm.AwaitReady(l.stdoutR, l.stderrR); err != nil {
		w.Discard()
		return nil, err
	}
	if w.progPid, err = childOf(childPid); err != nil {
		w.Discard()
		return nil, err
	}
	if l.cg != nil {
		w.startCPU = l.cg.Stats().CPUTime
	}
	return w, nil
}

// childOf returns the one child of process pid: bwrap's init has one,
// the program.
func childOf(pid int) (int, error) {
	p := strconv.Itoa(pid)
	for i := 0; i < 200; i++ {
		b, err := os.ReadFile("/proc/" + p + "/task/" + p + "/children")
		if err != nil {
			return 0, fmt.Errorf("find the interpreter: %w", err)
		}
		if f := strings.Fields(string(b)); len(f) > 0 {
			return strconv.Atoi(f[0])
		}
		time.Sleep(time.Millisecond)
	}
	return 0, errors.New("find the interpreter: bwrap's init has no child")
}
