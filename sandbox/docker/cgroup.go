package docker

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cgroupFiles locate a container's cgroup on this host, found through its
// first process. They give what the engine's API gives only slowly (peak
// memory and CPU time: the stats endpoint can take a second) or only
// asynchronously (OOM kills: an event), and tell whether any process besides
// the idle first one is left. Empty when the engine is not local.
type cgroupFiles struct {
	v2             bool
	memory, cpu    string // directories (the same one on v2)
	procs          string // cgroup.procs listing every process
	firstProcessID string // the container's `sleep`, as seen from here
}

// findCgroup reads /proc/PID/cgroup of the container's first process.
func findCgroup(pid int) (cgroupFiles, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return cgroupFiles{}, err
	}
	cg := cgroupFiles{firstProcessID: strconv.Itoa(pid)}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.SplitN(sc.Text(), ":", 3)
		if len(f) != 3 {
			continue
		}
		if f[0] == "0" && f[1] == "" {
			dir := filepath.Join("/sys/fs/cgroup", f[2])
			if _, err := os.Stat(filepath.Join(dir, "memory.current")); err == nil {
				cg = cgroupFiles{v2: true, memory: dir, cpu: dir, procs: filepath.Join(dir, "cgroup.procs"), firstProcessID: cg.firstProcessID}
				return cg, nil
			}
		}
		for _, ctrl := range strings.Split(f[1], ",") {
			dir := v1Dir(f[1], ctrl, f[2])
			switch {
			case ctrl == "memory" && dir != "":
				cg.memory, cg.procs = dir, filepath.Join(dir, "cgroup.procs")
			case ctrl == "cpuacct" && dir != "":
				cg.cpu = dir
			}
		}
	}
	if cg.memory == "" {
		return cgroupFiles{}, fmt.Errorf("no memory cgroup for pid %d", pid)
	}
	return cg, nil
}

// v1Dir finds a v1 hierarchy's directory: mounted under the joint name
// ("cpu,cpuacct") or the controller's own.
func v1Dir(joint, ctrl, rel string) string {
	for _, m := range []string{joint, ctrl} {
		dir := filepath.Join("/sys/fs/cgroup", m, rel)
		if _, err := os.Stat(dir); err == nil {
			return dir
		}
	}
	return ""
}

// onlyFirstLeft reports whether the program and all its descendants are
// gone: the cgroup holds the container's first process alone. ok is false
// when that cannot be read.
func (c cgroupFiles) onlyFirstLeft() (only, ok bool) {
	if c.procs == "" {
		return false, false
	}
	data, err := os.ReadFile(c.procs)
	if err != nil {
		return false, false
	}
	return strings.TrimSpace(string(data)) == c.firstProcessID, true
}

// killAll sends SIGKILL to every process of the cgroup from here, which is
// faster than the engine's kill (tens of milliseconds, during which a disk
// filler writes on); the engine's kill follows and covers any stragglers.
func (c cgroupFiles) killAll() {
	if c.procs == "" {
		return
	}
	data, err := os.ReadFile(c.procs)
	if err != nil {
		return
	}
	for _, f := range strings.Fields(string(data)) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// oomKills is the number of processes the kernel killed for the cgroup's
// memory limit, or -1 when unknown.
func (c cgroupFiles) oomKills() int64 {
	file := "memory.oom_control"
	if c.v2 {
		file = "memory.events"
	}
	if c.memory == "" {
		return -1
	}
	return readKey(filepath.Join(c.memory, file), "oom_kill")
}

// usage returns CPU time and peak memory, zero where unknown. On v1 the
// peak adds that of socket buffers, a counter of their own there: a bound
// from above of the peak of both together.
func (c cgroupFiles) usage() (time.Duration, int64) {
	var cpu time.Duration
	var peak int64
	if c.v2 {
		if us := readKey(filepath.Join(c.cpu, "cpu.stat"), "usage_usec"); us > 0 {
			cpu = time.Duration(us) * time.Microsecond
		}
		peak = readInt(filepath.Join(c.memory, "memory.peak"))
		if peak <= 0 {
			peak = readInt(filepath.Join(c.memory, "memory.current"))
		}
		return cpu, max(peak, 0)
	}
	if c.cpu != "" {
		cpu = time.Duration(max(readInt(filepath.Join(c.cpu, "cpuacct.usage")), 0))
	}
	if c.memory != "" {
		peak = max(readInt(filepath.Join(c.memory, "memory.max_usage_in_bytes")), 0) +
			max(readInt(filepath.Join(c.memory, "memory.kmem.tcp.max_usage_in_bytes")), 0)
	}
	return cpu, peak
}

func readInt(path string) int64 {
	data, err := os.ReadFile(path)
	if err != nil {
		return -1
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// readKey reads "key N" from a flat-keyed file, -1 when missing.
func readKey(path, key string) int64 {
	data, err := os.ReadFile(path)
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(line, " "); ok && k == key {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err == nil {
				return n
			}
		}
	}
	return -1
}
