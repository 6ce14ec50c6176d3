package sandbox

import "time"

// PoolStats is the state of one pool of sandboxes a backend keeps started
// ahead, for metrics (a server's /metrics).
type PoolStats struct {
	// Pool names what it keeps: "sandbox" (sandboxes started ahead for
	// the command run last) or "python" (warm Python interpreters).
	Pool string
	// Size is the most it keeps ready; Target what it keeps ready now,
	// for the recent demand.
	Size, Target    int
	Ready, Starting int
	// Hits and Misses count the executions that found a sandbox ready and
	// those that started one on demand (or ran cold).
	Hits, Misses uint64
	// Refills counts the sandboxes started ahead; RefillCPU the CPU time
	// those ready used to start, 0 when not measured.
	Refills   uint64
	RefillCPU time.Duration
}

// Pools is implemented by a backend that keeps sandboxes started ahead.
type Pools interface {
	// PoolStats reports each of its pools.
	PoolStats() []PoolStats
}
