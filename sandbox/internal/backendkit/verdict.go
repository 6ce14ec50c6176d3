package backendkit

import (
	"fmt"

	"github.com/codeagent/codeagent/sandbox"
)

// KillReason says why a backend killed an execution, if it did.
type KillReason int

const (
	NotKilled     KillReason = iota
	KilledTimeout            // the wall-clock limit (or the caller's deadline) ran out
	KilledDisk               // the workspace grew past the disk limit
	KilledCancel             // the caller cancelled
)

// Signal numbers the verdict uses; the same on every platform Linux runs on.
const (
	sigKill = 9
	sigXCPU = 24
	sigXFSZ = 25
)

// Verdict fills in res's Status, Signal, ExitCode and Message from how an
// execution ended: the backend's own kill first, then the kernel's OOM
// killer, then the exit code, where 128+N means signal N (as shells and
// container runtimes report it) and SIGXCPU means the CPU-time limit. Every
// backend uses it, so that the same ending gets the same verdict.
func Verdict(res *sandbox.Result, lim sandbox.Limits, killed KillReason, oom bool, code int) {
	res.ExitCode = code
	switch {
	case killed == KilledTimeout:
		res.Status, res.Signal = sandbox.StatusTimeout, sigKill
		res.Message = fmt.Sprintf("killed after the wall-clock limit of %s", lim.WallTime)
	case killed == KilledDisk:
		res.Status, res.Signal = sandbox.StatusSignaled, sigXFSZ
		res.Message = fmt.Sprintf("killed: the workspace grew past the disk limit of %s", sandbox.FormatSize(lim.Disk))
	case killed == KilledCancel:
		res.Status, res.Signal = sandbox.StatusSignaled, sigKill
		res.Message = "killed: the run was cancelled"
	case oom:
		res.Status, res.Signal = sandbox.StatusMemoryLimit, sigKill
		res.Message = fmt.Sprintf("killed: the memory limit of %s was exceeded", sandbox.FormatSize(lim.Memory))
	case code == 0:
		res.Status = sandbox.StatusOK
	case code > 128 && code <= 128+64:
		res.Status, res.Signal = sandbox.StatusSignaled, code-128
		res.Message = "ended by " + sandbox.SignalName(res.Signal)
		if res.Signal == sigXCPU {
			res.Status = sandbox.StatusTimeout
			res.Message = fmt.Sprintf("killed after the CPU-time limit of %s", lim.CPUTime)
		}
	case code < 0:
		res.Status = sandbox.StatusSignaled
		res.Message = "the sandbox ended abnormally"
	default:
		res.Status = sandbox.StatusError
	}
}

// NoteLeftBehind tells in res that a copy back left skipped entries
// behind for the disk limit: a program that ended by itself gets the disk
// limit's verdict, and the message says how many.
func NoteLeftBehind(res *sandbox.Result, lim sandbox.Limits, skipped int) {
	if skipped == 0 {
		return
	}
	if res.Status == sandbox.StatusOK || res.Status == sandbox.StatusError {
		Verdict(res, lim, KilledDisk, false, res.ExitCode)
	}
	what := fmt.Sprintf("%d entries were", skipped)
	if skipped == 1 {
		what = "1 entry was"
	}
	res.Message += "; " + what + " not copied back to the workspace, which would have grown past the limit"
}
