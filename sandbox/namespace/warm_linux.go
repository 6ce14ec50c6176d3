//go:build linux && (amd64 || arm64)

package namespace

import (
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/codeagent/codeagent/lang"
	"github.com/codeagent/codeagent/sandbox"
)

// Warm interpreters (Config.WarmPython). A Python program spends most of
// a fresh sandbox's time importing pandas, numpy and matplotlib and, at
// exit, tearing them down again. A warm interpreter is a sandbox that is
// already fully set up (namespaces, mounts, seccomp, its cgroup) and whose
// python3 has imported the scientific stack, but that has no workspace yet:
// it waits for one request on its stdin (warm.py). For an execution the
// backend, as root, attaches the workspace and the execution's files into
// the sandbox's mount namespace (open_tree, setns and move_mount from a
// thread that then ends, as for launchers), resizes /tmp and /dev/shm, sets
// the cgroup limits and rlimits (RLIMIT_CPU counts on from the CPU the
// imports used), and writes the program's arguments and environment; the
// interpreter changes into /workspace and runs the program as __main__.
// Each warm interpreter serves one execution and is then destroyed, like
// every sandbox. Unprivileged, the backend cannot enter a sandbox's mount
// namespace, and runs every program cold.

//go:embed warm.py
var warmLoader []byte

// warmLoaderPath is where the loader lies in the sandbox; /code is
// mounted over at the execution, hiding it.
const warmLoaderPath = "/code/.codeagent-warm.py"

// Bounds of warm interpreters.
const (
	warmMinMemory   = 192 << 20        // a smaller memory limit runs cold: the stack takes ~90 MiB
	warmMinProcs    = 16               // the interpreter has a few threads already
	warmStartup     = 60 * time.Second // warm-up deadline, and its CPU budget
	warmMaxAge      = 30 * time.Minute // older interpreters are replaced, not used
	warmMaxFailures = 3                // consecutive warm-up failures that stop the pool
)

// warmInterp is one warm interpreter.
type warmInterp struct {
	l        *launcher
	childPid int // the sandbox's first process (bwrap's init)
	progPid  int // the interpreter
	pidfd    int
	stdin    *io.PipeWriter // the request, then the program's stdin
	exited   chan struct{}  // closed when bwrap has exited
	waitErr  error
	born     time.Time
}

func (w *warmInterp) alive() bool {
	select {
	case <-w.exited:
		return false
	default:
		return time.Since(w.born) < warmMaxAge
	}
}

// discard ends the interpreter and removes its cgroup.
func (w *warmInterp) discard() {
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
type warmPool struct {
	b        *Backend
	size     int
	mu       sync.Mutex
	ready    []*warmInterp
	starting int
	closed   bool
	failures int
	runs     int64 // executions that ran warm (not those it fell back from)
}

func newWarmPool(b *Backend, size int) *warmPool {
	return &warmPool{b: b, size: size}
}

// take returns a ready interpreter, or nil: the caller runs cold rather
// than wait for one being warmed (which takes longer than a cold start),
// and the pool fills up in the background.
func (p *warmPool) take() *warmInterp {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.failures >= warmMaxFailures {
		return nil
	}
	for len(p.ready) > 0 {
		w := p.ready[0]
		p.ready = p.ready[1:]
		if w.alive() {
			return w
		}
		p.b.background(w.discard)
	}
	p.fillLocked()
	return nil
}

// fill starts interpreters until the pool is full.
func (p *warmPool) fill() {
	p.mu.Lock()
	p.fillLocked()
	p.mu.Unlock()
}

func (p *warmPool) fillLocked() {
	for !p.closed && p.failures < warmMaxFailures && len(p.ready)+p.starting < p.size {
		p.starting++
		p.b.background(func() {
			w, err := p.b.startWarm()
			p.mu.Lock()
			defer p.mu.Unlock()
			p.starting--
			if err != nil {
				p.failures++
				p.b.log.Warn("start a warm interpreter", "err", err, "failures", p.failures)
				return
			}
			p.failures = 0
			if p.closed {
				p.b.background(w.discard)
				return
			}
			p.ready = append(p.ready, w)
		})
	}
}

// close discards the ready interpreters; those being started are
// discarded when they are ready (Close waits for the background work).
func (p *warmPool) close() {
	p.mu.Lock()
	p.closed = true
	ready := p.ready
	p.ready = nil
	p.mu.Unlock()
	for _, w := range ready {
		w.discard()
	}
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

// ran counts an execution that ran in a warm interpreter.
func (p *warmPool) ran() {
	p.mu.Lock()
	p.runs++
	p.mu.Unlock()
}

// WarmRuns reports how many executions ran in a warm interpreter.
func (b *Backend) WarmRuns() int64 {
	if b.warm == nil {
		return 0
	}
	b.warm.mu.Lock()
	defer b.warm.mu.Unlock()
	return b.warm.runs
}

// warmEnv is the environment a warm interpreter starts with: a Python
// program's default one.
func warmEnv() map[string]string {
	py, _ := lang.Lookup("python")
	return py.Env
}

// warmLimits bound a warm interpreter until its execution sets its own.
func warmLimits() sandbox.Limits {
	return sandbox.Limits{WallTime: warmStartup, CPUTime: warmStartup}.WithDefaults()
}

// startWarm starts a warm interpreter and waits until it has imported the
// stack.
func (b *Backend) startWarm() (*warmInterp, error) {
	spec := sandbox.Spec{Command: []string{"python3", warmLoaderPath}, Env: warmEnv(),
		Files: []sandbox.File{{Path: warmLoaderPath, Data: warmLoader}}}
	lim := warmLimits()
	l, err := b.newLauncher(spec)
	if err != nil {
		return nil, err
	}
	pr, pw := io.Pipe()
	w := &warmInterp{l: l, pidfd: -1, stdin: pw, exited: make(chan struct{}), born: time.Now()}
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
		if err := l.cg.SetLimits(cgroupLimitsOf(lim)); err != nil {
			return fail(err)
		}
	}
	// The workspace is an empty root-owned directory until the execution's
	// is mounted over it.
	tmp := b.tmpFilesFor(spec)
	l.start(bwrapOptions(b.layout, spec, lim, b.mnt+"/empty", true, tmp), b.seccomp, spec.Files, tmp, pr)
	childPid, err := readChildPid(l.infoR)
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
	if err := w.awaitReady(); err != nil {
		w.discard()
		return nil, err
	}
	if w.progPid, err = childOf(childPid); err != nil {
		w.discard()
		return nil, err
	}
	return w, nil
}

// awaitReady reads the loader's "ready" line from the sandbox's stdout.
// The loader writes nothing else before its request, so nothing of the
// program's output is read here.
func (w *warmInterp) awaitReady() error {
	_ = w.l.stdoutR.SetReadDeadline(time.Now().Add(warmStartup))
	defer w.l.stdoutR.SetReadDeadline(time.Time{})
	var line []byte
	buf := make([]byte, 64)
	for len(line) < 512 {
		n, err := w.l.stdoutR.Read(buf)
		line = append(line, buf[:n]...)
		if i := strings.IndexByte(string(line), '\n'); i >= 0 {
			if s := string(line[:i]); s != "ready" {
				return fmt.Errorf("warm-up failed: %.200q", s)
			}
			if i != len(line)-1 {
				return errors.New("warm-up wrote more than its ready line")
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("warm-up: %w%s", err, stderrHint(w.l.stderrR))
		}
	}
	return errors.New("warm-up: no ready line")
}

// stderrHint is what the sandbox wrote on stderr so far, for an error.
func stderrHint(f *os.File) string {
	_ = f.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
	b := make([]byte, 2048)
	n, _ := f.Read(b)
	if n == 0 {
		return ""
	}
	return ": " + strings.TrimSpace(string(b[:n]))
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
