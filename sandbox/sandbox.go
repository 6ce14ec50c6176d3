// Package sandbox defines how codeagent runs untrusted programs: the Sandbox
// interface that every backend implements, the Spec of one execution, its
// Limits, and the Result with a typed Status verdict. Helpers that only
// backends use (their verdict, their checked Run, the host id range) are
// below it, in package sandbox/internal/backendkit.
//
// A Sandbox is the security boundary of codeagent. Static checks only help
// the model; whatever a program does, a backend must keep it inside its
// workspace, off the network, and within its limits.
package sandbox

import (
	"context"
	"errors"
	"io"
	"syscall"
	"time"
)

// WorkspacePath is where the workspace appears inside the sandbox; it is the
// program's working directory.
const WorkspacePath = "/workspace"

// Sandbox runs programs in isolation.
//
// Run executes spec in a fresh sandbox and returns only once every process it
// started is gone, whatever the outcome. The program's verdict (success, exit
// code, timeout, memory limit, signal) is in Result.Status; an error means the
// sandbox could not run the program at all (bad spec, isolation unavailable,
// setup failure) and is then a *SetupError or wraps ErrInvalidSpec. When ctx
// is cancelled the program is killed and Run returns promptly with
// StatusSignaled or StatusTimeout and ctx's error is not returned.
//
// Close releases what a backend keeps between runs (sandboxes started
// ahead, files); Run must not be called after it.
//
// Implementations are safe for concurrent use.
type Sandbox interface {
	Run(ctx context.Context, spec Spec) (Result, error)
	Close() error
}

// Spec describes one execution.
type Spec struct {
	// Command is the argv run inside the sandbox; Command[0] is looked up in
	// the sandbox's PATH.
	Command []string
	// Workspace is the host directory mounted read-write at WorkspacePath.
	// It must exist.
	Workspace string
	// Files are placed read-only inside the sandbox, typically the program.
	Files []File
	// Env holds variables added to the sandbox's clean environment, which
	// otherwise has only PATH, HOME, LANG and TMPDIR.
	Env map[string]string
	// Stdin is the program's standard input; nil means empty.
	Stdin io.Reader
	// Stdout and Stderr, when set, receive the program's output live, within
	// the same cap as the Result's copy.
	Stdout, Stderr io.Writer
	// Limits bound the execution; zero fields take DefaultLimits' values.
	Limits Limits
	// Stream sends all of stdout and stderr to Stdout and Stderr as it
	// comes, without Limits.Output's cap, and keeps none of it in the
	// Result: for a long-lived program whose caller reads, bounds and
	// parses what it writes (a kernel, see package kernel). The program
	// waits while Stdout or Stderr do.
	Stream bool
	// Started, when set, is called once the program runs, with a handle
	// on it that is valid until Run returns. Backends that cannot offer
	// one do not call it.
	Started func(Running)
	// LiveWorkspace asks that the program's writes reach Workspace while
	// it runs, for a long-lived program whose files are read meanwhile (a
	// kernel's). Run as root, the namespace backend gives it a copy of the
	// workspace on a file system of the disk limit's size and offers
	// Syncer on its Running handle; where it cannot (run by an ordinary
	// user, no loop devices), it binds the workspace itself and its disk
	// limit rests on the disk watcher. The Docker and Kubernetes backends
	// copy writes back at the end all the same.
	LiveWorkspace bool
	// Binds are host directories shown read-only to the program, below
	// BindRoot (a dependency environment, say). Each Source must be a
	// directory that no sandbox can write, reached without symbolic
	// links; nothing below it is set-user-ID or a device to the program
	// (nosuid, nodev). A backend that cannot bind refuses the spec with
	// an error wrapping ErrInvalidSpec.
	Binds []Bind
	// Network, when set, lets the program reach the hosts it allows
	// through codeagent's proxy; nil (the default) is no network. Gateway
	// is set by the egress layer (see Gateway).
	Network *Network
	Gateway Gateway
	// Imports, when not nil, are the top-level modules the program
	// imports by itself, as its caller read them from its source (see
	// safety.PythonImports); nil means unknown. A hint for how to start
	// the program, never a limit on what it may import: the namespace
	// backend gives a warm interpreter (one that imported pandas, numpy
	// and matplotlib ahead) only to a program that may use it.
	Imports []string
}

// Bind is a host directory shown read-only inside the sandbox.
type Bind struct {
	// Source is the absolute host path of the directory.
	Source string
	// Path is where it appears: a clean absolute path below BindRoot.
	Path string
}

// BindRoot is the directory below which Binds appear in a sandbox, and
// MaxBinds the most a spec may have.
const (
	BindRoot = "/deps"
	MaxBinds = 8
)

// File is a read-only file placed inside the sandbox.
type File struct {
	// Path is absolute inside the sandbox, outside the workspace, e.g.
	// /code/main.py.
	Path string
	Data []byte
}

// ErrInvalidSpec is wrapped by errors about a Spec that cannot be run.
var ErrInvalidSpec = errors.New("invalid sandbox spec")

// SetupError reports that the sandbox could not be set up; Reason is meant
// for people ("user namespaces are disabled: ...").
type SetupError struct {
	Reason string
	Err    error
}

func (e *SetupError) Error() string {
	if e.Err != nil {
		return "sandbox setup: " + e.Reason + ": " + e.Err.Error()
	}
	return "sandbox setup: " + e.Reason
}

func (e *SetupError) Unwrap() error { return e.Err }

// CopyBackError reports that the program ran but what it wrote could not
// all be brought into the host's workspace (its disk is full, say): the
// workspace holds part of the writes. It wraps the cause, so that a full
// disk is errors.Is(err, syscall.ENOSPC).
type CopyBackError struct{ Err error }

func (e *CopyBackError) Error() string {
	if errors.Is(e.Err, syscall.ENOSPC) || errors.Is(e.Err, syscall.EDQUOT) {
		return "the disk of the workspace is full: what the program wrote is only partly in the workspace: " + e.Err.Error()
	}
	return "bring what the program wrote into the workspace: " + e.Err.Error()
}

func (e *CopyBackError) Unwrap() error { return e.Err }

// Result is what became of one execution.
type Result struct {
	Status   Status
	ExitCode int
	// Signal is the number of the signal that ended the program, or 0.
	Signal int
	// Message explains a verdict other than ok or error in one sentence.
	Message         string
	Stdout, Stderr  []byte
	StdoutTruncated bool
	StderrTruncated bool
	WallTime        time.Duration
	CPUTime         time.Duration
	PeakMemory      int64
	// Egress records the network, for a Spec with a Network.
	Egress *Egress
	// WeakIsolation names what the backend's isolation probe found not
	// refused, when the caller accepted running anyway
	// (--allow-weak-isolation); empty when the program ran as the
	// conformance suite requires.
	WeakIsolation []string
}

// Exit statuses of a result, as timeout(1) and shells have them; the
// command line's exit codes (cmd/codeagent/exitcode.go) and the JSON
// result's exit_code are these.
const (
	ExitTimeout    = 124 // the program ran out of wall-clock time
	ExitSandbox    = 125 // the sandbox could not run it
	ExitMemory     = 137 // killed for memory (128 + SIGKILL)
	ExitSignalBase = 128 // 128 + N for signal N
)

// ExitStatus is the process exit status a command-line front end should
// return for this result: the program's own code, ExitTimeout, ExitMemory,
// ExitSandbox, or ExitSignalBase+N for signal N.
func (r Result) ExitStatus() int {
	switch r.Status {
	case StatusOK:
		return 0
	case StatusTimeout:
		return ExitTimeout
	case StatusMemoryLimit:
		return ExitMemory
	case StatusSandboxError:
		return ExitSandbox
	case StatusSignaled:
		if r.Signal > 0 {
			return ExitSignalBase + r.Signal
		}
		return ExitSignalBase + 9
	}
	if r.ExitCode == 0 {
		return 1
	}
	return r.ExitCode
}
