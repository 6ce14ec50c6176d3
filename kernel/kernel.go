// Package kernel runs stateful Python interpreters in the sandbox,
// Jupyter-style: a Kernel executes code cells one after another in one
// namespace, shows the value of a cell's last expression and what it
// displays as MIME bundles (text/plain, text/html, image/png), streams
// stdout and stderr, and saves the matplotlib figures a cell leaves open as
// PNG files in the workspace. A Session keeps a kernel for one workspace
// and starts a fresh one when it ended, saying so in the next result; a
// Manager keeps the sessions of a server (one kernel per session and API
// key, an idle timeout, a cap on live kernels).
//
// A kernel is one long execution of its sandbox: every isolation property
// and limit of an execution holds for it, and memory, processes, disk and
// CPU are counted over the kernel's whole life. The protocol (kernel.py,
// protocol.go) assumes the code inside is hostile: messages and waits are
// bounded, and nothing the kernel says about limits or usage is believed.
package kernel

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/codeagent/codeagent/lang"
	"github.com/codeagent/codeagent/sandbox"
)

//go:embed kernel.py
var kernelPy []byte

// kernelPath is where kernel.py lies in the sandbox.
const kernelPath = "/code/kernel.py"

// Defaults and bounds.
const (
	DefaultCellTimeout  = 30 * time.Second
	DefaultStartTimeout = 60 * time.Second
	// PreloadMinMemory is the smallest memory limit with which a kernel
	// imports pandas, numpy and matplotlib at start (they take ~90 MiB).
	PreloadMinMemory = 256 << 20
	// MaxCode bounds a cell's code and its stdin.
	MaxCode = 16 << 20
	// interruptGrace is how long an interrupted cell may take to stop
	// before the kernel is killed.
	interruptGrace = time.Second
	writeTimeout   = 5 * time.Second
	syncTimeout    = time.Minute
	endTimeout     = 10 * time.Second
)

// DefaultLimits are a kernel's limits over its whole life: WallTime is
// its longest life and CPUTime its CPU budget; Output bounds each stream
// of each cell.
func DefaultLimits() sandbox.Limits {
	return sandbox.Limits{WallTime: 12 * time.Hour, CPUTime: time.Hour, Memory: 512 << 20, Processes: 64,
		Output: 1 << 20, FileSize: 100 << 20, Disk: 500 << 20, OpenFiles: 256, CPUs: 1}
}

// Preload says whether a kernel imports the scientific stack at start.
type Preload int

const (
	PreloadAuto   Preload = iota // when the memory limit is at least PreloadMinMemory
	PreloadAlways                // always
	PreloadNever                 // never: plain Python, ~15 MB
)

// Options configure a kernel.
type Options struct {
	// Sandbox runs the kernel; required. Kernels last long: a backend
	// that keeps warm interpreters (namespace.Config.WarmPython) starts
	// them in milliseconds.
	Sandbox sandbox.Sandbox
	// Workspace is the host directory mounted at /workspace; required.
	Workspace string
	// Limits bound the kernel over its whole life (zero fields take
	// DefaultLimits' values; see there).
	Limits sandbox.Limits
	// Env is added to the sandbox's environment (and Python's own).
	Env map[string]string
	// Files are more read-only files outside the workspace.
	Files []sandbox.File
	// Binds are host directories shown read-only (a dependency
	// environment, with PYTHONPATH in Env).
	Binds   []sandbox.Bind
	Preload Preload
	// StartTimeout bounds the start (default DefaultStartTimeout).
	StartTimeout time.Duration
}

func (o Options) limits() sandbox.Limits { return DefaultLimits().Overlay(o.Limits) }

// ErrEnded is returned by Exec on a kernel that has ended.
var ErrEnded = errors.New("the kernel has ended")

// ErrInvalid wraps errors about a cell or options that cannot be run.
var ErrInvalid = errors.New("invalid kernel request")

// Kernel is one live interpreter. It is safe for concurrent use; cells
// run one at a time.
type Kernel struct {
	opts    Options
	lim     sandbox.Limits
	stdin   *io.PipeWriter
	cancel  context.CancelFunc
	started time.Time
	ended   chan struct{} // closed when the sandbox's Run returned
	res     sandbox.Result
	runErr  error
	running atomic.Pointer[sandbox.Running]
	stderr  sandbox.CappedBuffer // the kernel's own stderr, for errors
	execMu  sync.Mutex

	mu        sync.Mutex
	cur       *cell
	ready     chan struct{}
	preloaded bool
	killed    string // why we ended it
	nextID    int
	count     int
	lastUsed  time.Time
	dec       decoder
}

// Start starts a kernel and waits until it is ready. ctx bounds only the
// start; the kernel lives until Close, the end of its limits, or a kill.
func Start(ctx context.Context, opts Options) (*Kernel, error) {
	if opts.Sandbox == nil || opts.Workspace == "" {
		return nil, fmt.Errorf("%w: a sandbox and a workspace are required", ErrInvalid)
	}
	lim := opts.limits()
	preload := opts.Preload == PreloadAlways || (opts.Preload == PreloadAuto && lim.Memory >= PreloadMinMemory)
	py, _ := lang.Lookup("python")
	env := map[string]string{}
	for k, v := range py.Env {
		env[k] = v
	}
	for k, v := range opts.Env {
		env[k] = v
	}
	cmd := []string{"python3", kernelPath}
	if preload {
		cmd = append(cmd, "--preload")
	}
	pr, pw := io.Pipe()
	rctx, cancel := context.WithCancel(context.Background())
	k := &Kernel{opts: opts, lim: lim, stdin: pw, cancel: cancel, started: time.Now(), ended: make(chan struct{}),
		ready: make(chan struct{}), lastUsed: time.Now()}
	k.stderr.Cap = 8 << 10
	k.dec.handle = k.handle
	spec := sandbox.Spec{
		Command:   cmd,
		Workspace: opts.Workspace,
		Files:     append([]sandbox.File{{Path: kernelPath, Data: kernelPy}}, opts.Files...),
		Binds:     opts.Binds,
		Env:       env,
		Stdin:     pr,
		Stdout:    writerFunc(k.protocol),
		Stderr:    &k.stderr,
		Stream:    true,
		// The workspace shows a cell's files (figures) as it writes them.
		LiveWorkspace: true,
		Limits:        lim,
		Started:       func(r sandbox.Running) { k.running.Store(&r) },
	}
	go func() {
		res, err := opts.Sandbox.Run(rctx, spec)
		k.mu.Lock()
		k.res, k.runErr = res, err
		k.mu.Unlock()
		_ = pr.CloseWithError(ErrEnded)
		close(k.ended)
	}()
	timeout := opts.StartTimeout
	if timeout <= 0 {
		timeout = DefaultStartTimeout
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-k.ready:
		return k, nil
	case <-k.ended:
		if k.runErr != nil {
			return nil, k.runErr
		}
		return nil, fmt.Errorf("the kernel ended as it started (%s %s): %s", k.res.Status, k.res.Message, clip(string(k.stderr.Bytes()), 2000))
	case <-ctx.Done():
		k.kill("cancelled")
		return nil, fmt.Errorf("start the kernel: %w", ctx.Err())
	case <-t.C:
		k.kill("timeout")
		return nil, &sandbox.SetupError{Reason: "the kernel did not start within " + timeout.String()}
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// protocol receives what the kernel writes on stdout. The backend calls
// it from one goroutine.
func (k *Kernel) protocol(p []byte) (int, error) { return k.dec.Write(p) }

func (k *Kernel) handle(line []byte, tooLong bool) {
	k.mu.Lock()
	c := k.cur
	k.mu.Unlock()
	if tooLong {
		if c != nil {
			c.mu.Lock()
			c.dropped++
			c.mu.Unlock()
		}
		return
	}
	var m message
	if json.Unmarshal(line, &m) != nil {
		return
	}
	if m.T == "ready" {
		k.mu.Lock()
		select {
		case <-k.ready:
		default:
			k.preloaded = m.Preloaded
			close(k.ready)
		}
		k.mu.Unlock()
		return
	}
	if c != nil && m.ID == c.id {
		c.apply(&m)
	}
}

// write sends one request line, giving up after timeout: a kernel that
// stops reading its requests is killed by the caller.
func (k *Kernel) write(v any, timeout time.Duration) error {
	line, err := json.Marshal(v)
	if err != nil {
		return err
	}
	errc := make(chan error, 1)
	go func() {
		_, err := k.stdin.Write(append(line, '\n'))
		errc <- err
	}()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case err := <-errc:
		return err
	case <-k.ended:
		return ErrEnded
	case <-t.C:
		return errors.New("the kernel does not read its requests")
	}
}

// Cell is one piece of code to run.
type Cell struct {
	Code string
	// Stdin is what the cell reads as sys.stdin.
	Stdin string
	// Timeout is the cell's wall-clock limit (default DefaultCellTimeout):
	// then it is interrupted (KeyboardInterrupt, the kernel's state is
	// kept) and, if it does not stop within a second, the kernel is
	// killed and its state lost.
	Timeout time.Duration
	// OnOutput, when set, receives stdout and stderr as they come.
	OnOutput func(stream string, data []byte)
}

// Exec runs c and returns what became of it. The kernel's own verdicts
// (an exception, a timeout, the kernel's death) are in the Result; an
// error means the cell could not be run (ErrEnded, ErrInvalid).
func (k *Kernel) Exec(ctx context.Context, c Cell) (Result, error) {
	if len(c.Code) > MaxCode || len(c.Stdin) > MaxCode {
		return Result{}, fmt.Errorf("%w: code and stdin are limited to %d bytes each", ErrInvalid, MaxCode)
	}
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = DefaultCellTimeout
	}
	k.execMu.Lock()
	defer k.execMu.Unlock()
	if !k.Alive() {
		return Result{}, ErrEnded
	}
	k.mu.Lock()
	k.nextID++
	cs := newCell("c"+strconv.Itoa(k.nextID), k.lim.Output, c.OnOutput)
	k.cur = cs
	k.lastUsed = time.Now()
	k.mu.Unlock()
	defer func() {
		k.mu.Lock()
		k.cur = nil
		k.lastUsed = time.Now()
		k.mu.Unlock()
	}()
	// Changes others made to the workspace since the last cell reach the
	// kernel's copy of it first (see sandbox.Syncer).
	if err := k.sync(ctx); err != nil {
		return Result{}, &sandbox.SetupError{Reason: "bring the kernel's copy of the workspace up to date", Err: err}
	}
	u0 := k.Usage()
	start := time.Now()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	if err := k.write(map[string]string{"op": "exec", "id": cs.id, "code": c.Code, "stdin": c.Stdin}, min(timeout, writeTimeout)); err != nil && !errors.Is(err, ErrEnded) {
		k.kill("crash")
	}
	interrupted := ""
	select {
	case <-cs.done:
	case <-k.ended:
	case <-deadline.C:
		interrupted = "timeout"
	case <-ctx.Done():
		interrupted = "cancelled"
	}
	if interrupted != "" {
		_ = k.write(map[string]string{"op": "interrupt", "id": cs.id}, interruptGrace)
		grace := time.NewTimer(interruptGrace)
		select {
		case <-cs.done:
		case <-k.ended:
		case <-grace.C:
			k.kill(interrupted)
		}
		grace.Stop()
	}
	overDisk := false
	select {
	case <-cs.done:
		if k.diskExceeded() {
			// The cell's writes passed the disk limit just before it
			// ended, and the sandbox is being killed for them: that, not
			// the cell's own end, is its verdict.
			k.waitEnded()
			overDisk = true
		}
	default:
		k.waitEnded()
	}
	res := k.result(cs, interrupted, timeout, start, u0, overDisk)
	if k.Alive() {
		// The cell's files reach the workspace before its result.
		if err := k.sync(ctx); err != nil {
			note := "the cell's files did not all reach the workspace: " + err.Error()
			if res.Message != "" {
				note = res.Message + "; " + note
			}
			res.Message = note
		}
	}
	return res, nil
}

// sync brings the kernel's copy of its workspace and the workspace up to
// date with each other, where the sandbox gives the kernel a copy.
func (k *Kernel) sync(ctx context.Context) error {
	r := k.running.Load()
	if r == nil {
		return nil
	}
	s, ok := (*r).(sandbox.Syncer)
	if !ok || !k.Alive() {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), syncTimeout)
	defer cancel()
	return s.Sync(ctx)
}

// diskExceeded reports whether the kernel's sandbox, counting every write
// so far, is past its disk limit (see sandbox.DiskSettler).
func (k *Kernel) diskExceeded() bool {
	r := k.running.Load()
	if r == nil {
		return false
	}
	ds, ok := (*r).(sandbox.DiskSettler)
	return ok && ds.DiskExceeded()
}

// waitEnded waits, bounded, for the sandbox to have ended.
func (k *Kernel) waitEnded() {
	select {
	case <-k.ended:
	case <-time.After(endTimeout):
		k.kill("crash")
		<-k.ended
	}
}

// kill ends the kernel for why, the first reason given.
func (k *Kernel) kill(why string) {
	k.mu.Lock()
	if k.killed == "" {
		k.killed = why
	}
	k.mu.Unlock()
	k.cancel()
}

// Close ends the kernel (why is its end reason, e.g. "idle") and waits
// for its sandbox to be gone.
func (k *Kernel) Close(why string) {
	k.mu.Lock()
	if k.killed == "" {
		k.killed = why
	}
	k.mu.Unlock()
	k.cancel()
	k.waitEnded()
}

// Alive reports whether the kernel still runs.
func (k *Kernel) Alive() bool {
	select {
	case <-k.ended:
		return false
	default:
		return true
	}
}

// Ended is closed when the kernel has ended.
func (k *Kernel) Ended() <-chan struct{} { return k.ended }

// EndReason says why an ended kernel ended: timeout (a cell that did not
// stop), memory, cpu (its CPU budget), disk, lifetime, crash (it exited
// or died by itself), or the reason given to Close.
func (k *Kernel) EndReason() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.killed != "" {
		return k.killed
	}
	switch k.res.Status {
	case sandbox.StatusMemoryLimit:
		return "memory"
	case sandbox.StatusTimeout:
		if k.res.Signal == 24 { // SIGXCPU
			return "cpu"
		}
		return "lifetime"
	case sandbox.StatusSignaled:
		if k.res.Signal == 25 {
			return "disk"
		}
	}
	return "crash"
}

// Usage is what the kernel's sandbox holds and used, measured on the
// host; zero when the backend cannot tell.
func (k *Kernel) Usage() sandbox.Usage {
	if r := k.running.Load(); r != nil && k.Alive() {
		return (*r).Usage()
	}
	return sandbox.Usage{}
}

// Status is a kernel's state for people and metrics.
type Status struct {
	Alive          bool      `json:"alive"`
	Preloaded      bool      `json:"preloaded"`
	ExecutionCount int       `json:"execution_count"`
	StartedAt      time.Time `json:"started_at"`
	LastUsedAt     time.Time `json:"last_used_at"`
	Busy           bool      `json:"busy"`
	MemoryBytes    int64     `json:"memory_bytes"`
	RSSBytes       int64     `json:"rss_bytes"`
	CPUMS          int64     `json:"cpu_ms"`
}

// Status returns the kernel's state now.
func (k *Kernel) Status() Status {
	u := k.Usage()
	k.mu.Lock()
	defer k.mu.Unlock()
	return Status{Alive: k.Alive(), Preloaded: k.preloaded, ExecutionCount: k.count, StartedAt: k.started,
		LastUsedAt: k.lastUsed, Busy: k.cur != nil, MemoryBytes: u.Memory, RSSBytes: u.RSS, CPUMS: u.CPUTime.Milliseconds()}
}
