//go:build linux && (amd64 || arm64)

package namespace

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/sandbox/internal/diskwatch"
)

// The Running handle (Spec.Started) of every execution, cold or warm, and
// the accounting files of a run cgroup it reads.

// cgroupFiles are the accounting files of a run cgroup that the warm path
// and Running read beyond runCgroup's methods.
type cgroupFiles struct {
	usage, peak, procs string
	resetPeak          string // written to restart the peak, "" when the kernel cannot
}

func filesOf(cg runCgroup) (cgroupFiles, bool) {
	switch r := cg.(type) {
	case *v1Run:
		mem := r.dirs["memory"]
		return cgroupFiles{usage: filepath.Join(mem, "memory.usage_in_bytes"), peak: filepath.Join(mem, "memory.max_usage_in_bytes"),
			procs: filepath.Join(r.dirs["pids"], "cgroup.procs"), resetPeak: "0"}, true
	case *v2Run:
		return cgroupFiles{usage: filepath.Join(r.dir, "memory.current"), peak: filepath.Join(r.dir, "memory.peak"),
			procs: filepath.Join(r.dir, "cgroup.procs"), resetPeak: "reset"}, true
	}
	return cgroupFiles{}, false
}

// running is the Running handle of an execution: what its cgroup and its
// processes hold, read on the host.
type running struct {
	cg      runCgroup
	baseCPU time.Duration      // the warm-up's, not the program's
	ws      *diskwatch.Watcher // the run's disk watcher
}

var (
	_ sandbox.Running     = running{}
	_ sandbox.DiskSettler = running{}
)

// DiskExceeded implements sandbox.DiskSettler.
func (r running) DiskExceeded() bool { return r.ws != nil && r.ws.Settle() }

func (r running) Usage() sandbox.Usage {
	var u sandbox.Usage
	f, ok := filesOf(r.cg)
	if !ok {
		return u
	}
	u.Memory = readInt(f.usage)
	st := r.cg.Stats()
	u.PeakMemory = st.PeakMemory
	u.CPUTime = max(st.CPUTime-r.baseCPU, 0)
	procs, _ := os.ReadFile(f.procs)
	for _, p := range strings.Fields(string(procs)) {
		u.RSS += statusKB(p, "VmRSS:")
	}
	return u
}

// statusKB reads a "Key: N kB" line of /proc/pid/status, in bytes.
func statusKB(pid, key string) int64 {
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, key); ok {
			f := strings.Fields(v)
			if len(f) > 0 {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				return n * 1024
			}
		}
	}
	return 0
}

// started calls spec.Started for a cold execution; with sw, the handle
// syncs the program's copy of the workspace.
func (r *run) started(l *launcher, ws *diskwatch.Watcher, sw *syncedWS) {
	if r.spec.Started == nil || l.cg == nil {
		return
	}
	if sw != nil {
		r.spec.Started(syncedRunning{running{cg: l.cg, ws: ws}, sw})
		return
	}
	r.spec.Started(running{cg: l.cg, ws: ws})
}

// syncedRunning is the Running handle of a program with a copy of its
// workspace: it is a sandbox.Syncer.
type syncedRunning struct {
	running
	s *syncedWS
}

var _ sandbox.Syncer = syncedRunning{}

// Sync implements sandbox.Syncer.
func (r syncedRunning) Sync(ctx context.Context) error { return r.s.Sync(ctx) }
