//go:build linux && (amd64 || arm64)

package namespace

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/sandbox/internal/backendkit"
	"github.com/codeagent/codeagent/sandbox/internal/diskwatch"
	"github.com/codeagent/codeagent/sandbox/internal/hostids"
)

// Backend runs programs in Linux namespaces through bubblewrap.
type Backend struct {
	cfg     Config
	log     *slog.Logger
	bwrap   string
	layout  layout
	seccomp []byte
	cgroups cgroupManager // nil: rlimits only
	etc     string        // the prepared /etc
	trust   trustSource   // where its certificate bundle came from
	mnt     string        // the workspace mount point and /proc masks
	mpl     *tmpFile      // matplotlib's font list for Python sandboxes, or nil
	hostUID int           // the first host uid of programs when root, else -1
	ids     *hostids.Pool // the host uids of sandboxes, one each, when root
	warm    *warmPool     // warm interpreters (Config.WarmPython), or nil
	idmaps  *idmaps       // user namespaces for idmapped workspaces, when root
	owner   lastOwner     // of the latest workspace, for idmaps made ahead
	// scratch is the directory of upper-layer images when the workspace
	// is an overlay (see upperFS), "" when it is bound itself and only the
	// disk watcher bounds it.
	scratch  string
	overlays atomic.Bool // workspaces are overlays; off after a failure

	bg          sync.WaitGroup // cleanups and refills under way
	liveCgroups atomic.Int64   // cgroups created and not yet removed
	mu          sync.Mutex
	closed      bool
	pool        []*launcher // warm launchers for poolKey
	poolKey     string
	poolStats   sandbox.PoolStats // the warm launchers' counters
	// noPidNS starts launchers without a PID namespace of their own, as
	// before; only BenchmarkOverheadPidNS sets it, to measure its cost.
	noPidNS    bool
	starting   int
	lastLimits sandbox.Limits        // of the latest run, for upper layers made ahead
	running    map[*upperFS]struct{} // upper layers of runs under way
}

// removeFiles removes the mount directory; the prepared /etc is shared
// (see sharedEtc) and stays.
func (b *Backend) removeFiles() error {
	if b.mnt == "" {
		return nil
	}
	return os.RemoveAll(b.mnt)
}

// asRoot reports whether programs run as the backend's own host uid.
func (b *Backend) asRoot() bool { return b.hostUID >= 0 }

// ReactiveDisk reports whether the workspace disk limit rests on the disk
// watcher alone (the workspace is bound itself: codeagent is not root, or
// cannot make overlays and loop devices here, or Config.PlainWorkspace),
// rather than on the size of the file system that takes the writes.
func (b *Backend) ReactiveDisk() bool { return !b.overlays.Load() }

var _ sandbox.Sandbox = (*Backend)(nil)

// New checks the host and returns a ready backend, or a *sandbox.SetupError
// that says what is missing. It starts no process: the first sandbox proves
// that namespaces work here, and its failure is explained by the full probe.
func New(cfg Config) (*Backend, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	rep, mgr := probe(cfg, false)
	if !rep.Usable {
		return nil, &sandbox.SetupError{Reason: strings.Join(rep.Problems, "; ")}
	}
	for _, w := range rep.Warnings {
		log.Warn("weaker isolation", "detail", w)
	}
	var err error
	hostUID := -1
	if os.Geteuid() == 0 {
		hostUID = programHostUID(cfg) // checked by probe (backendkit.CheckHostUID)
	}
	base := os.TempDir()
	var ids *hostids.Pool
	if hostUID >= 0 {
		if base, err = rootBaseDir(rootBaseDirs, 0o755); err != nil {
			return nil, &sandbox.SetupError{Reason: "the backend's directory", Err: err}
		}
		if ids, err = hostids.Open(hostids.Dir, hostUID, backendkit.HostUIDCount); err != nil {
			return nil, &sandbox.SetupError{Reason: "the sandboxes' host uids", Err: err}
		}
	}
	etcBase := base
	if hostUID < 0 {
		if c := userCacheBase(); c != "" {
			etcBase = c
		}
	}
	trust := hostTrustSource()
	etc, err := sharedEtc(etcBase, trust)
	if err != nil {
		return nil, &sandbox.SetupError{Reason: "prepare /etc", Err: err}
	}
	mnt, err := prepareMountDir(base)
	if err != nil {
		return nil, &sandbox.SetupError{Reason: "prepare the mount directory", Err: err}
	}
	b := &Backend{cfg: cfg, log: log, bwrap: rep.Bwrap, seccomp: seccompProgram(), etc: etc, trust: trust, mnt: mnt, hostUID: hostUID,
		ids: ids, running: map[*upperFS]struct{}{}}
	b.layout = hostLayout(etc, mnt)
	if hostUID >= 0 {
		b.idmaps = newIdmaps(helperBinary(rep.Bwrap))
		b.useOverlays()
	}
	if rep.CgroupVersion > 0 {
		b.cgroups = mgr
	}
	// What crashed processes left is removed in the background (Close
	// waits for it): reading the directories and cgroups, and killing what
	// is left in a group, need not delay the first run.
	b.background(func() {
		if n := sweepLeftovers(base); n > 0 {
			log.Info("removed the directories of sandbox backends whose process died", "dir", base, "removed", n)
		}
		if b.cgroups != nil {
			b.cgroups.Sweep()
		}
	})
	b.mpl = b.prepareMplCache(etcBase)
	if n := warmPythonSize(cfg.WarmPython); n > 0 && b.asRoot() && b.cgroups != nil {
		b.warm = newWarmPool(b, n)
	}
	return b, nil
}

// Run implements sandbox.Sandbox.
func (b *Backend) Run(ctx context.Context, spec sandbox.Spec) (sandbox.Result, error) {
	if err := validate(spec); err != nil {
		return sandbox.Result{Status: sandbox.StatusSandboxError, Message: err.Error()}, err
	}
	lim := spec.Limits.WithDefaults()
	if res, ok, err := b.runWarm(ctx, spec, lim); ok {
		return res, err
	}
	r := &run{b: b, spec: spec, lim: lim}
	r.initFD.Store(-1)
	res, err := r.execute(ctx)
	if err != nil {
		res.Status = sandbox.StatusSandboxError
		res.Message = err.Error()
	}
	return res, err
}

func validate(spec sandbox.Spec) error {
	if err := spec.Validate(); err != nil {
		return err
	}
	for _, f := range spec.Files {
		for _, reserved := range []string{sandbox.WorkspacePath, "/proc", "/dev", "/tmp", "/usr", "/etc"} {
			if f.Path == reserved || strings.HasPrefix(f.Path, reserved+"/") {
				return fmt.Errorf("%w: file path %q is inside %s", sandbox.ErrInvalidSpec, f.Path, reserved)
			}
		}
	}
	return nil
}

// run is the state of one execution.
type run struct {
	b    *Backend
	spec sandbox.Spec
	lim  sandbox.Limits

	mu     sync.Mutex
	reason backendkit.KillReason
	// initFD is a pidfd of the sandbox's first process (-1 until known):
	// killing it ends every process of the PID namespace at once, sooner
	// than through bwrap, and a pidfd never reaches a recycled pid.
	initFD atomic.Int64
}

func (r *run) execute(ctx context.Context) (sandbox.Result, error) {
	var res sandbox.Result
	l, err := r.b.launcher(r.spec)
	if err != nil {
		return res, &sandbox.SetupError{Reason: "start bubblewrap", Err: err}
	}
	defer r.b.release(l, r.spec)
	if l.cg != nil {
		if err := l.cg.SetLimits(cgroupLimitsOf(r.lim)); err != nil {
			return res, &sandbox.SetupError{Reason: "cgroup limits", Err: err}
		}
	}
	wsDir, err := backendkit.ResolveWorkspace(r.spec.Workspace)
	if err != nil {
		return res, &sandbox.SetupError{Reason: "workspace", Err: err}
	}
	wsFile, err := sandbox.OpenWorkspace(wsDir)
	if err != nil {
		return res, &sandbox.SetupError{Reason: "workspace", Err: err}
	}
	defer wsFile.Close()
	source, watched, dl := wsDir, wsDir, diskwatch.Limits{Bytes: r.lim.Disk}
	var up *upperFS  // the overlay's upper layer, when the workspace is one
	var sw *syncedWS // or the program's copy of the workspace (see synced)
	var wsSt unix.Stat_t
	if r.b.asRoot() {
		if err := unix.Fstat(int(wsFile.Fd()), &wsSt); err != nil {
			return res, &sandbox.SetupError{Reason: "workspace", Err: err}
		}
		r.b.noteOwner(&wsSt)
		source = r.b.mountPoint()
		if sw, dl, err = r.synced(l, wsFile, &wsSt); err != nil {
			return res, &sandbox.SetupError{Reason: "copy the workspace for the program", Err: err}
		}
		if sw == nil {
			up, dl, err = r.overlay(l, wsFile, &wsSt)
		}
		if err != nil {
			return res, &sandbox.SetupError{Reason: "mount the workspace", Err: err}
		}
		if sw != nil {
			watched = sw.up.watchPath()
			defer sw.close()
		} else if up != nil {
			watched = up.watchPath()
			defer r.b.unregister(up)
		} else if err := r.b.attachWorkspace(l, wsFile, &wsSt, source); err != nil {
			return res, &sandbox.SetupError{Reason: "mount the workspace", Err: err}
		}
	}
	if up == nil && sw == nil {
		// The program writes to the workspace itself: its modes are
		// checked afterwards (see modeGuard).
		defer r.b.guard(wsFile)()
	}
	ws, err := diskwatch.Start(watched, dl, func() { r.kill(l, backendkit.KilledDisk) })
	if err != nil {
		return res, &sandbox.SetupError{Reason: "measure workspace", Err: err}
	}
	defer ws.Stop()

	stdout := &sandbox.CappedBuffer{Cap: r.lim.Output, Live: r.spec.Stdout, Stream: r.spec.Stream}
	stderr := &sandbox.CappedBuffer{Cap: r.lim.Output, Live: r.spec.Stderr, Stream: r.spec.Stream}
	drained := l.collect(stdout, stderr)
	binds, err := r.b.attachBinds(l, r.spec.Binds)
	if err != nil {
		return res, &sandbox.SetupError{Reason: "bind directories", Err: err}
	}
	tmp := r.b.tmpFilesFor(r.spec)
	l.start(bwrapOptions(r.b.layout, r.spec, r.lim, source, r.b.asRoot(), tmp, binds), r.b.seccomp, r.spec.Files, tmp, r.spec.Stdin)

	childPid, err := l.childPid()
	if err == nil {
		// The process waits for us now (id maps, --block-fd), so the pid
		// is still its own.
		if fd, perr := unix.PidfdOpen(childPid, 0); perr == nil {
			r.initFD.Store(int64(fd))
			defer func() { r.initFD.Store(-1); unix.Close(fd) }()
		}
		l.holdNamespaces(childPid)
	}
	if err == nil {
		err = l.mapIDs(childPid, l.uid, r.b.asRoot())
	}
	if err == nil {
		err = r.confine(childPid, l)
	}
	if err == nil && sw != nil {
		err = sw.freezeWith(l.cg, childPid)
	}
	if err == nil && !r.b.asRoot() {
		err = verifyWorkspace(childPid, wsFile)
	}
	if err == nil {
		err = openGateway(childPid, r.spec.Gateway) // egress: see package egress
	}
	if err != nil {
		_ = l.cmd.Process.Kill()
		_ = l.cmd.Wait()
		drained(time.Second)
		return res, &sandbox.SetupError{Reason: "bubblewrap failed", Err: errors.New(explainSetup(r.b.cfg, setupMessage(stderr.Bytes(), err)))}
	}

	start := time.Now()
	if _, err := l.blockW.Write([]byte{0}); err != nil {
		return res, &sandbox.SetupError{Reason: "release sandbox", Err: err}
	}
	_ = l.blockW.Close()
	if sw != nil {
		sw.watch = ws
	}
	r.started(l, ws, sw)

	stopWatch := r.watch(ctx, l)
	waitErr := l.cmd.Wait()
	stopWatch()
	if ws.Stop() {
		r.setReason(backendkit.KilledDisk) // past the limit at the end, or the kill raced the exit
	}
	res.WallTime = time.Since(start)
	drained(2 * time.Second)

	res.Stdout, res.Stderr = stdout.Bytes(), stderr.Bytes()
	res.StdoutTruncated, res.StderrTruncated = stdout.Truncated(), stderr.Truncated()
	ps := l.cmd.ProcessState
	var stats cgroupStats
	if l.cg != nil {
		stats = l.cg.Stats()
	}
	if stats.CPUTime == 0 && ps != nil {
		stats.CPUTime = ps.UserTime() + ps.SystemTime()
	}
	if stats.PeakMemory == 0 && ps != nil {
		if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
			stats.PeakMemory = ru.Maxrss * 1024
		}
	}
	res.CPUTime, res.PeakMemory = stats.CPUTime, stats.PeakMemory
	r.verdict(&res, ps, waitErr, stats)
	if sw != nil {
		// Every process of the sandbox is gone: the copy is final.
		if err := sw.end(); err != nil {
			return res, &sandbox.CopyBackError{Err: err}
		}
	}
	if up != nil {
		// Every process of the sandbox is gone: the upper layer is final.
		t0 := time.Now()
		if err := mergeUpper(up.upper, wsFile); err != nil {
			return res, &sandbox.CopyBackError{Err: err}
		}
		r.b.log.Debug("merged the upper layer into the workspace", "took", time.Since(t0))
	}
	return res, nil
}

// watch kills l's sandbox at the wall-clock limit or when ctx ends, until
// the returned stop is called.
func (r *run) watch(ctx context.Context, l *launcher) (stop func()) {
	timer := time.AfterFunc(r.lim.WallTime, func() { r.kill(l, backendkit.KilledTimeout) })
	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				r.kill(l, backendkit.KilledTimeout)
			} else {
				r.kill(l, backendkit.KilledCancel)
			}
		case <-done:
		}
	}()
	return func() {
		close(done)
		timer.Stop()
	}
}

// kill ends the sandbox for why, the first reason given.
func (r *run) kill(l *launcher, why backendkit.KillReason) {
	r.setReason(why)
	if fd := r.initFD.Load(); fd >= 0 {
		_ = unix.PidfdSendSignal(int(fd), unix.SIGKILL, nil, 0)
	}
	_ = l.cmd.Process.Kill()
	if l.cg != nil {
		l.cg.Kill()
	}
}

func (r *run) setReason(why backendkit.KillReason) {
	r.mu.Lock()
	if r.reason == backendkit.NotKilled {
		r.reason = why
	}
	r.mu.Unlock()
}

// confine makes sure that the sandbox's first process, still blocked before
// it execs the program, is in its cgroup (it usually is, born of bwrap after
// bwrap's own move) and puts it under its rlimits; everything it starts
// inherits both.
func (r *run) confine(pid int, l *launcher) error {
	cg := l.cg
	if err := joinCgroup(pid, cg); err != nil {
		return err
	}
	if r.b.asRoot() {
		return asUID(l.uid, func() error { return setRlimits(pid, r.lim, cg == nil) })
	}
	return setRlimits(pid, r.lim, cg == nil)
}

// joinCgroup makes sure that pid is in cg (nil: no cgroup).
func joinCgroup(pid int, cg runCgroup) error {
	if cg != nil && !cg.Contains(pid) {
		if err := cg.Add(pid); err != nil {
			return err
		}
		if !cg.Contains(pid) {
			return errors.New("the sandbox did not join its cgroup")
		}
	}
	return nil
}

// mapIDs writes the sandbox's id maps when mapping (as root) and lets
// bwrap go on, then waits for bwrap's move into its cgroup.
func (l *launcher) mapIDs(childPid, hostUID int, mapping bool) error {
	var err error
	if mapping {
		err = writeIDMaps(childPid, hostUID)
		if err == nil {
			_, err = l.usernsW.Write([]byte{0})
		}
	}
	_ = l.usernsW.Close()
	<-l.moved
	if err == nil {
		err = l.moveErr
	}
	return err
}

// verdict fills in the status from how the sandbox ended.
func (r *run) verdict(res *sandbox.Result, ps *os.ProcessState, waitErr error, stats cgroupStats) {
	r.mu.Lock()
	reason := r.reason
	r.mu.Unlock()
	code := -1
	if ps != nil {
		code = ps.ExitCode() // bwrap's init reports a program killed by signal N as 128+N
	}
	backendkit.Verdict(res, r.lim, reason, stats.OOMKills > 0, code)
	switch {
	case res.Status == sandbox.StatusSignaled && code < 0 && reason == backendkit.NotKilled:
		if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			res.Signal = int(ws.Signal())
		}
		res.Message = fmt.Sprintf("sandbox ended abnormally: %v", waitErr)
	case res.Status == sandbox.StatusError && bytes.HasPrefix(res.Stderr, []byte("bwrap: execvp ")):
		res.ExitCode = 127 // the shell's "command not found"
	}
}

// programHostUID is the host uid of programs when codeagent runs as root.
func programHostUID(cfg Config) int {
	if cfg.HostUID > 0 {
		return cfg.HostUID
	}
	return backendkit.DefaultHostUID
}
