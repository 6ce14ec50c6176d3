package sandbox

import "time"

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
