//go:build linux && (amd64 || arm64)

package namespace

import (
	"fmt"
	"math"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/codeagent/codeagent/sandbox"
)

type rlimit struct {
	resource  int
	soft, max uint64
}

// setRlimits applies per-process limits to pid. Without a cgroup, memory and
// processes fall back to RLIMIT_AS and RLIMIT_NPROC, which are weaker: the
// former counts each process's private writable memory (not shared memory, and per process), the latter every process
// of the user.
func setRlimits(pid int, lim sandbox.Limits, fallback bool) error {
	cpu := max(uint64(math.Ceil(lim.CPUTime.Seconds())), 1)
	limits := []rlimit{
		{unix.RLIMIT_CPU, cpu, cpu + 1},
		{unix.RLIMIT_FSIZE, uint64(lim.FileSize), uint64(lim.FileSize)},
		{unix.RLIMIT_NOFILE, uint64(lim.OpenFiles), uint64(lim.OpenFiles)},
		{unix.RLIMIT_CORE, 0, 0},
		{unix.RLIMIT_MSGQUEUE, 0, 0},
	}
	if fallback {
		limits = append(limits,
			rlimit{unix.RLIMIT_DATA, uint64(lim.Memory), uint64(lim.Memory)},
			rlimit{unix.RLIMIT_NPROC, uint64(lim.Processes), uint64(lim.Processes)},
			rlimit{unix.RLIMIT_NICE, 0, 0})
		// No CPU quota without a cgroup: the program is pinned to as many
		// CPUs as its limit allows (the filter refuses sched_setaffinity)
		// and runs at the lowest priority (RLIMIT_NICE 0 keeps it there),
		// so that it cannot take the host, nor starve the disk watcher
		// that must see its writes in time.
		if err := pinCPUs(pid, lim.CPUs); err != nil {
			return fmt.Errorf("pin the sandbox's CPUs: %w", err)
		}
		if err := unix.Setpriority(unix.PRIO_PROCESS, pid, 19); err != nil {
			return fmt.Errorf("lower the sandbox's priority: %w", err)
		}
	}
	for _, l := range limits {
		rl := unix.Rlimit{Cur: l.soft, Max: l.max}
		if err := unix.Prlimit(pid, l.resource, &rl, nil); err != nil {
			return fmt.Errorf("set rlimit %d: %w", l.resource, err)
		}
	}
	return nil
}

// nextCPU spreads pinned sandboxes over the CPUs.
var nextCPU atomic.Uint32

// pinCPUs limits process pid to ceil(cpus) of the CPUs this process may
// use, taken in turn, or all of them when there are no more.
func pinCPUs(pid int, cpus float64) error {
	var allowed unix.CPUSet
	if err := unix.SchedGetaffinity(0, &allowed); err != nil {
		return err
	}
	var ids []int
	for i := 0; i < len(allowed)*64; i++ {
		if allowed.IsSet(i) {
			ids = append(ids, i)
		}
	}
	n := int(math.Ceil(cpus))
	if n <= 0 || n >= len(ids) {
		return nil
	}
	var set unix.CPUSet
	first := int(nextCPU.Add(uint32(n)))
	for i := 0; i < n; i++ {
		set.Set(ids[(first+i)%len(ids)])
	}
	return unix.SchedSetaffinity(pid, &set)
}
