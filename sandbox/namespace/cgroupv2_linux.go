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

// cgroupV2 manages the unified hierarchy. Because a v2 cgroup with enabled
// controllers may not hold processes, the "codeagent" group is made beside
// this process's own cgroup (or below the root when this process is in it),
// never below it.
type cgroupV2 struct {
	parent string
}

func newCgroupV2(m mountInfo, own string) (*cgroupV2, error) {
	ownDir := hostPath(m, own)
	base := filepath.Dir(ownDir)
	if own == "/" || ownDir == m.point {
		base = m.point
	}
	ctrls, err := os.ReadFile(filepath.Join(base, "cgroup.subtree_control"))
	if err != nil {
		return nil, fmt.Errorf("read controllers: %w", err)
	}
	have := strings.Fields(string(ctrls))
	for _, need := range []string{"memory", "pids", "cpu"} {
		if !slices.Contains(have, need) {
			return nil, fmt.Errorf("controller %s is not enabled in %s", need, base)
		}
	}
	parent := filepath.Join(base, cgroupParentName)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", parent, err)
	}
	if err := canCreate(parent); err != nil {
		return nil, err
	}
	want := "+memory +pids +cpu"
	if err := writeFile(filepath.Join(parent, "cgroup.subtree_control"), want); err != nil {
		return nil, fmt.Errorf("enable controllers in %s: %w", parent, err)
	}
	return &cgroupV2{parent: parent}, nil
}

func (c *cgroupV2) Version() int { return 2 }

func (c *cgroupV2) Sweep() { sweepStale(c.parent) }

func (c *cgroupV2) New(lim cgroupLimits) (runCgroup, error) {
	id := runCgroupID()
	dir := filepath.Join(c.parent, id)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create cgroup: %w", err)
	}
	r := &v2Run{id: id, dir: dir}
	if err := r.SetLimits(lim); err != nil {
		_ = r.Destroy()
		return nil, err
	}
	return r, nil
}

type v2Run struct{ id, dir string }

// SetLimits sets memory.max, which counts socket buffers too (unless the
// host boots with cgroup.memory=nosocket), the process limit, cpu.max and
// cpu.weight.
func (r *v2Run) SetLimits(lim cgroupLimits) error {
	for _, kv := range [][2]string{
		{"memory.max", strconv.FormatInt(lim.Memory, 10)},
		{"memory.swap.max", "0"}, // absent without swap accounting
		{"pids.max", strconv.Itoa(lim.Pids)},
		{"cpu.max", strconv.FormatInt(cfsQuota(lim.CPUs), 10) + " " + strconv.Itoa(cfsPeriod)},
		{"cpu.weight", strconv.Itoa(lim.cpuWeight())},
	} {
		if err := writeFile(filepath.Join(r.dir, kv[0]), kv[1]); err != nil && kv[0] != "memory.swap.max" {
			return fmt.Errorf("set %s: %w", kv[0], err)
		}
	}
	return nil
}

func (r *v2Run) Contains(pid int) bool {
	cgs, err := procCgroups(strconv.Itoa(pid))
	return err == nil && isRunPath(cgs[""], r.id)
}

func (r *v2Run) Add(pid int) error {
	if err := writeFile(filepath.Join(r.dir, "cgroup.procs"), strconv.Itoa(pid)); err != nil {
		return fmt.Errorf("join cgroup: %w", err)
	}
	return nil
}

func (r *v2Run) Stats() cgroupStats {
	return cgroupStats{
		OOMKills:   readKeyed(filepath.Join(r.dir, "memory.events"), "oom_kill"),
		PeakMemory: readInt(filepath.Join(r.dir, "memory.peak")),
		CPUTime:    time.Duration(readKeyed(filepath.Join(r.dir, "cpu.stat"), "usage_usec")) * time.Microsecond,
	}
}

func (r *v2Run) Kill() {
	if err := writeFile(filepath.Join(r.dir, "cgroup.kill"), "1"); err != nil {
		killProcs(filepath.Join(r.dir, "cgroup.procs"))
	}
}

func (r *v2Run) Destroy() error {
	_ = r.Thaw() // a frozen process cannot die
	r.Kill()
	return removeDir(r.dir)
}
