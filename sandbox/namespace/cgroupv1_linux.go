//go:build linux && (amd64 || arm64)

package namespace

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// cgroupV1 manages per-controller hierarchies: memory, pids, cpu and
// cpuacct. Controllers mounted together (cpu,cpuacct) share a directory.
type cgroupV1 struct {
	parents map[string]string // controller -> .../codeagent directory
	freezer string            // the freezer's .../codeagent directory, "" without one
}

var v1Controllers = []string{"memory", "pids", "cpu", "cpuacct"}

func newCgroupV1(mounts []mountInfo, self map[string]string) (*cgroupV1, error) {
	c := &cgroupV1{parents: map[string]string{}}
	for _, ctrl := range v1Controllers {
		var found bool
		for _, m := range mounts {
			if m.fstype != "cgroup" || !slices.Contains(strings.Split(m.super, ","), ctrl) {
				continue
			}
			found = true
			own, ok := self[ctrl]
			if !ok {
				own = "/"
			}
			parent := filepath.Join(hostPath(m, own), cgroupParentName)
			if err := os.MkdirAll(parent, 0o755); err != nil {
				return nil, fmt.Errorf("%s controller: %w", ctrl, err)
			}
			if err := canCreate(parent); err != nil {
				return nil, fmt.Errorf("%s controller: %w", ctrl, err)
			}
			c.parents[ctrl] = parent
			break
		}
		if !found {
			return nil, fmt.Errorf("no %s controller mounted", ctrl)
		}
	}
	c.freezer = v1FreezerParent(mounts, self)
	return c, nil
}

func (c *cgroupV1) Version() int { return 1 }

func (c *cgroupV1) Sweep() {
	done := map[string]bool{}
	parents := slices.Collect(maps.Values(c.parents))
	if c.freezer != "" {
		parents = append(parents, c.freezer)
	}
	for _, parent := range parents {
		if !done[parent] {
			done[parent] = true
			sweepStale(parent)
		}
	}
}

func (c *cgroupV1) New(lim cgroupLimits) (runCgroup, error) {
	id := runCgroupID()
	r := &v1Run{id: id, dirs: map[string]string{}, freezerParent: c.freezer}
	made := map[string]bool{}
	for ctrl, parent := range c.parents {
		dir := filepath.Join(parent, id)
		r.dirs[ctrl] = dir
		if made[dir] {
			continue
		}
		if err := os.Mkdir(dir, 0o755); err != nil {
			delete(r.dirs, ctrl)
			_ = r.Destroy()
			return nil, fmt.Errorf("create %s cgroup: %w", ctrl, err)
		}
		made[dir] = true
	}
	if err := r.SetLimits(lim); err != nil {
		_ = r.Destroy()
		return nil, err
	}
	return r, nil
}

type v1Run struct {
	id   string
	dirs map[string]string
	// freezerParent is the freezer hierarchy's codeagent directory;
	// freezer the run's group in it, once JoinFreezer made it.
	freezerParent, freezer string
}

// Add writes pid to every hierarchy at once: each move waits for an RCU
// grace period in the kernel, so moves made one after another would add up
// to milliseconds.
func (r *v1Run) Add(pid int) error {
	p := strconv.Itoa(pid)
	dirs := r.uniqueDirs()
	errs := make(chan error, len(dirs))
	for dir, ctrl := range dirs {
		go func() {
			if err := writeFile(filepath.Join(dir, "cgroup.procs"), p); err != nil {
				errs <- fmt.Errorf("join %s cgroup: %w", ctrl, err)
				return
			}
			errs <- nil
		}()
	}
	var first error
	for range dirs {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// uniqueDirs maps each directory of the run to one controller in it.
func (r *v1Run) uniqueDirs() map[string]string {
	out := make(map[string]string, len(r.dirs))
	for ctrl, dir := range r.dirs {
		out[dir] = ctrl
	}
	return out
}

// SetLimits may raise or lower the limits; memory+swap must never be below
// memory, so it is written on both sides of the memory limit. Socket
// buffers get tcpShare of the limit, the rest everything else.
func (r *v1Run) SetLimits(lim cgroupLimits) error {
	mem := r.dirs["memory"]
	tcp := tcpShare(lim.Memory)
	if err := writeFile(filepath.Join(mem, "memory.kmem.tcp.limit_in_bytes"), strconv.FormatInt(tcp, 10)); err != nil {
		return fmt.Errorf("set socket memory limit: %w", err)
	}
	limit := strconv.FormatInt(lim.Memory-tcp, 10)
	memsw := filepath.Join(mem, "memory.memsw.limit_in_bytes")
	_, err := os.Stat(memsw)
	hasSwap := err == nil // without swap accounting there is no swap to cap
	if hasSwap {
		_ = writeFile(memsw, limit)
	}
	if err := writeFile(filepath.Join(mem, "memory.limit_in_bytes"), limit); err != nil {
		return fmt.Errorf("set memory limit: %w", err)
	}
	if hasSwap {
		if err := writeFile(memsw, limit); err != nil {
			return fmt.Errorf("set memory+swap limit: %w", err)
		}
	}
	_ = writeFile(filepath.Join(mem, "memory.swappiness"), "0")
	if err := writeFile(filepath.Join(r.dirs["pids"], "pids.max"), strconv.Itoa(lim.Pids)); err != nil {
		return fmt.Errorf("set process limit: %w", err)
	}
	cpu := r.dirs["cpu"]
	_ = writeFile(filepath.Join(cpu, "cpu.cfs_period_us"), strconv.Itoa(cfsPeriod))
	if err := writeFile(filepath.Join(cpu, "cpu.cfs_quota_us"), strconv.FormatInt(cfsQuota(lim.CPUs), 10)); err != nil {
		return fmt.Errorf("set CPU quota: %w", err)
	}
	// cpu.shares: 1024 is v1's default as 100 is v2's; 2 its least.
	if err := writeFile(filepath.Join(cpu, "cpu.shares"), strconv.Itoa(max(2, lim.cpuWeight()*1024/100))); err != nil {
		return fmt.Errorf("set CPU weight: %w", err)
	}
	return nil
}

func (r *v1Run) Contains(pid int) bool {
	cgs, err := procCgroups(strconv.Itoa(pid))
	if err != nil {
		return false
	}
	for ctrl := range r.dirs {
		if !isRunPath(cgs[ctrl], r.id) {
			return false
		}
	}
	return true
}

func (r *v1Run) Stats() cgroupStats {
	mem := r.dirs["memory"]
	return cgroupStats{
		OOMKills:   readKeyed(filepath.Join(mem, "memory.oom_control"), "oom_kill"),
		PeakMemory: readInt(filepath.Join(mem, "memory.max_usage_in_bytes")),
		CPUTime:    time.Duration(readInt(filepath.Join(r.dirs["cpuacct"], "cpuacct.usage"))),
	}
}

func (r *v1Run) Kill() {
	if dir, ok := r.dirs["pids"]; ok {
		killProcs(filepath.Join(dir, "cgroup.procs"))
	}
}

func (r *v1Run) Destroy() error {
	if r.freezer != "" {
		_ = r.Thaw() // a frozen process cannot die
	}
	r.Kill()
	var first error
	if r.freezer != "" {
		if err := removeDir(r.freezer); err != nil {
			first = err
		}
	}
	for dir := range r.uniqueDirs() {
		if err := removeDir(dir); err != nil && first == nil {
			first = err
		}
	}
	return first
}
