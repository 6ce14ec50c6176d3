//go:build linux && (amd64 || arm64)

package namespace

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// cgroupV1 manages per-controller hierarchies: memory, pids and cpuacct.
type cgroupV1 struct {
	parents map[string]string // controller -> .../codeagent directory
}

var v1Controllers = []string{"memory", "pids", "cpuacct"}

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
			sweepStale(parent)
			c.parents[ctrl] = parent
			break
		}
		if !found {
			return nil, fmt.Errorf("no %s controller mounted", ctrl)
		}
	}
	return c, nil
}

func (c *cgroupV1) Version() int { return 1 }

func (c *cgroupV1) New(memory int64, pids int) (runCgroup, error) {
	id := randomID()
	r := &v1Run{id: id, dirs: map[string]string{}}
	for ctrl, parent := range c.parents {
		dir := filepath.Join(parent, id)
		if err := os.Mkdir(dir, 0o755); err != nil {
			_ = r.Destroy()
			return nil, fmt.Errorf("create %s cgroup: %w", ctrl, err)
		}
		r.dirs[ctrl] = dir
	}
	if err := r.SetLimits(memory, pids); err != nil {
		_ = r.Destroy()
		return nil, err
	}
	return r, nil
}

type v1Run struct {
	id   string
	dirs map[string]string
}

// Add writes pid to every hierarchy at once: each move waits for an RCU
// grace period in the kernel, so moves made one after another would add up
// to milliseconds.
func (r *v1Run) Add(pid int) error {
	p := strconv.Itoa(pid)
	errs := make(chan error, len(r.dirs))
	for ctrl, dir := range r.dirs {
		go func() {
			if err := writeFile(filepath.Join(dir, "cgroup.procs"), p); err != nil {
				errs <- fmt.Errorf("join %s cgroup: %w", ctrl, err)
				return
			}
			errs <- nil
		}()
	}
	var first error
	for range r.dirs {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// SetLimits may raise or lower the limits; memory+swap must never be below
// memory, so it is written on both sides of the memory limit.
func (r *v1Run) SetLimits(memory int64, pids int) error {
	mem := r.dirs["memory"]
	limit := strconv.FormatInt(memory, 10)
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
	if err := writeFile(filepath.Join(r.dirs["pids"], "pids.max"), strconv.Itoa(pids)); err != nil {
		return fmt.Errorf("set process limit: %w", err)
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
	r.Kill()
	var first error
	for _, dir := range r.dirs {
		if err := removeDir(dir); err != nil && first == nil {
			first = err
		}
	}
	return first
}
