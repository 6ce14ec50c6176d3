package sandbox

import (
	"context"
	"time"
)

// Running is a handle on a program while it runs (see Spec.Started).
type Running interface {
	// Usage measures what the sandbox holds and has used so far, from
	// the host (never from what the program says).
	Usage() Usage
}

// DiskSettler is implemented by a Running whose disk limit a watcher
// enforces as the program writes: DiskExceeded counts the writes made so
// far and reports whether they passed the limit, in which case the sandbox
// is being killed for it. A caller that reports on part of a run (a
// kernel's cell) asks before it takes the part's own end for its verdict.
type DiskSettler interface {
	DiskExceeded() bool
}

// Syncer is implemented by the Running handle of a program with
// Spec.LiveWorkspace whose workspace is a copy of its own (the namespace
// backend run as root: the copy lies on a file system of the disk limit's
// size). Sync brings the copy and Spec.Workspace up to date with each
// other: the program's changes since the last Sync reach the workspace,
// and changes others made to the workspace reach the copy; where both
// changed an entry, the later change wins, and a removal never takes the
// other side's change with it. Every process of the sandbox is stopped
// while it works, and the workspace locked against codeagent's other
// writers. A caller syncs at quiet points: a kernel before and after each
// cell. An error leaves both sides usable; ctx bounds the wait for the
// workspace's lock.
type Syncer interface {
	Sync(ctx context.Context) error
}

// Usage is a running sandbox's consumption.
type Usage struct {
	// Memory is the memory charged to the sandbox now (its cgroup's
	// usage, page cache included), or 0 when not measured.
	Memory int64
	// PeakMemory is the most memory charged to it so far.
	PeakMemory int64
	// RSS is the resident memory of its processes now, summed.
	RSS int64
	// CPUTime is the CPU time its processes have used since it started.
	CPUTime time.Duration
}
