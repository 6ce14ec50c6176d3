//go:build linux && (amd64 || arm64)

package namespace

import (
	"fmt"
	"math"

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
			rlimit{unix.RLIMIT_NPROC, uint64(lim.Processes), uint64(lim.Processes)})
	}
	for _, l := range limits {
		rl := unix.Rlimit{Cur: l.soft, Max: l.max}
		if err := unix.Prlimit(pid, l.resource, &rl, nil); err != nil {
			return fmt.Errorf("set rlimit %d: %w", l.resource, err)
		}
	}
	return nil
}
