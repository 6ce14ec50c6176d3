package kernel

import (
	"fmt"
	"time"

	"github.com/codeagent/codeagent/sandbox"
)

// Result is what became of one cell: the verdict and output of an
// execution (sandbox.Result: for a cell, exit code 1 means an exception,
// N a sys.exit(N); WallTime and CPUTime are the cell's, PeakMemory the
// kernel's so far) plus what it displayed.
type Result struct {
	sandbox.Result
	// ExecutionCount numbers the cells of the kernel, from 1.
	ExecutionCount int
	// Display holds the cell's MIME bundles in order.
	Display []Display
	// Images are the figures saved in the workspace.
	Images []string
	// ErrorName and ErrorValue describe the exception that ended the
	// cell, if one did (the traceback is in Stderr).
	ErrorName, ErrorValue string
	// Dropped counts displays and messages left out for their size.
	Dropped int
	// KernelDied says the kernel ended during this cell: its state is
	// lost, and the next cell starts a fresh one.
	KernelDied bool
	// KernelRestarted says this cell ran in a fresh kernel because the
	// previous one ended, for RestartReason: timeout, memory, cpu, disk,
	// lifetime, crash, idle, evicted, restart or cancelled.
	KernelRestarted bool
	RestartReason   string
}

// ResultJSON is the JSON form of a Result: the `exec --json` object plus
// the display, images and the kernel's fate.
type ResultJSON struct {
	sandbox.ResultJSON
	ExecutionCount  int       `json:"execution_count"`
	Display         []Display `json:"display"`
	Images          []string  `json:"images"`
	ErrorName       string    `json:"error_name,omitempty"`
	ErrorValue      string    `json:"error_value,omitempty"`
	Dropped         int       `json:"dropped,omitempty"`
	KernelDied      bool      `json:"kernel_died"`
	KernelRestarted bool      `json:"kernel_restarted"`
	RestartReason   string    `json:"restart_reason,omitempty"`
}

// JSON returns the JSON form of r.
func (r Result) JSON() ResultJSON {
	j := ResultJSON{ResultJSON: r.Result.JSON(), ExecutionCount: r.ExecutionCount, Display: r.Display, Images: r.Images,
		ErrorName: r.ErrorName, ErrorValue: r.ErrorValue, Dropped: r.Dropped, KernelDied: r.KernelDied,
		KernelRestarted: r.KernelRestarted, RestartReason: r.RestartReason}
	if j.Display == nil {
		j.Display = []Display{}
	}
	if j.Images == nil {
		j.Images = []string{}
	}
	return j
}

// result assembles the Result of cell cs: its own verdict when it ended by
// itself, else (the kernel ended during it, or overDisk: its writes passed
// the disk limit) the kernel's sandbox's.
func (k *Kernel) result(cs *cell, interrupted string, timeout time.Duration, start time.Time, u0 sandbox.Usage, overDisk bool) Result {
	var r Result
	cs.mu.Lock()
	done := cs.doneReceived
	r.Display, r.Images, r.Dropped = cs.displays, cs.images, cs.dropped
	r.ErrorName, r.ErrorValue = cs.errName, cs.errValue
	status, code, count := cs.status, cs.exitCode, cs.count
	cs.mu.Unlock()
	r.Stdout, r.Stderr = cs.stdout.Bytes(), cs.stderr.Bytes()
	r.StdoutTruncated, r.StderrTruncated = cs.stdout.Truncated(), cs.stderr.Truncated()
	r.WallTime = time.Since(start)
	u1 := k.Usage()
	if u1.CPUTime > 0 {
		r.CPUTime = max(u1.CPUTime-u0.CPUTime, 0)
	}
	if done && !overDisk {
		k.mu.Lock()
		k.count = count
		k.mu.Unlock()
		r.ExecutionCount = count
		r.PeakMemory = max(u1.PeakMemory, u1.Memory)
		switch {
		case status == "interrupted" && interrupted == "timeout":
			r.Status, r.ExitCode, r.Signal = sandbox.StatusTimeout, 124, 2
			r.Message = fmt.Sprintf("interrupted after the wall-clock limit of %s (KeyboardInterrupt); the kernel's state is kept", timeout)
		case status == "interrupted":
			r.Status, r.ExitCode, r.Signal = sandbox.StatusSignaled, 130, 2
			r.Message = "interrupted (KeyboardInterrupt); the kernel's state is kept"
		case status == "ok" || (status == "exit" && code == 0):
			r.Status = sandbox.StatusOK
		default:
			r.Status, r.ExitCode = sandbox.StatusError, max(code, 1)
		}
		return r
	}
	// The kernel ended during the cell, or for its writes: the verdict is
	// its sandbox's.
	k.mu.Lock()
	res, runErr, killed := k.res, k.runErr, k.killed
	k.mu.Unlock()
	r.KernelDied = true
	r.Status, r.ExitCode, r.Signal, r.PeakMemory = res.Status, res.ExitCode, res.Signal, res.PeakMemory
	r.Message = res.Message
	switch {
	case killed == "timeout":
		r.Status, r.ExitCode, r.Signal = sandbox.StatusTimeout, 124, 9
		r.Message = fmt.Sprintf("killed after the wall-clock limit of %s: the cell did not stop within %s of its interrupt", timeout, interruptGrace)
	case killed == "cancelled":
		r.Status, r.ExitCode, r.Signal = sandbox.StatusSignaled, 137, 9
		r.Message = "killed: the cell was cancelled and did not stop within " + interruptGrace.String() + " of its interrupt"
	case killed != "":
		r.Status, r.ExitCode, r.Signal = sandbox.StatusSignaled, 137, 9
		r.Message = "killed: the kernel was ended (" + killed + ")"
	case runErr != nil:
		r.Status, r.Message = sandbox.StatusSandboxError, runErr.Error()
	case r.Status == sandbox.StatusOK:
		r.Status, r.ExitCode = sandbox.StatusError, 1
		r.Message = "the kernel exited"
	}
	if r.Message != "" {
		r.Message += "; "
	}
	r.Message += "the kernel ended and its state is lost"
	return r
}
