//go:build linux && (amd64 || arm64)

package namespace

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/codeagent/codeagent/procid"
	"github.com/codeagent/codeagent/sandbox/internal/stagingfs"

	"github.com/codeagent/codeagent/sandbox"
)

// cgroupManager creates one cgroup per execution, below a "codeagent" group
// that it owns, for memory and process limits and for accounting.
type cgroupManager interface {
	// Version is 1 or 2.
	Version() int
	// New creates an empty cgroup with the limits set.
	New(lim cgroupLimits) (runCgroup, error)
	// Sweep removes the groups crashed processes left (see sweepStale);
	// it may take seconds, so the backend runs it in the background.
	Sweep()
}

// cgroupLimits are what a cgroup enforces for one execution.
type cgroupLimits struct {
	Memory int64   // bytes, socket buffers included
	Pids   int     // processes and threads
	CPUs   float64 // cores of CPU bandwidth (CFS quota)
	// Weight is the group's share of CPU time against its siblings when
	// they compete, on cgroup v2's scale (1-10000); 0 is the default,
	// 100. Warm-ups run at warmUpWeight, behind every execution.
	Weight int
}

// warmUpWeight is the CPU weight of a sandbox started ahead while it
// starts (a warm interpreter importing its stack): it gets the CPU the
// executions leave.
const warmUpWeight = 1

// cpuWeight is lim's Weight, the default for 0.
func (lim cgroupLimits) cpuWeight() int {
	if lim.Weight <= 0 {
		return 100
	}
	return min(lim.Weight, 10000)
}

// cfsPeriod is the CFS bandwidth period, in microseconds; the quota is
// CPUs periods' worth of CPU time per period.
const cfsPeriod = 100000

// cfsQuota is the quota for cpus cores, at least 1 ms per period (the
// kernel's minimum).
func cfsQuota(cpus float64) int64 { return max(int64(cpus*cfsPeriod), 1000) }

// tcpShare is the part of a cgroup v1 memory limit set aside for socket
// buffers. Version 1 charges socket memory to a counter of its own
// (memory.kmem.tcp), not to the memory limit, and only once it has a limit;
// so the memory limit is split: an eighth (at most 16 MiB) for sockets,
// the rest for everything else, and together they never exceed the limit.
// Version 2 charges sockets to memory.max itself.
func tcpShare(memory int64) int64 { return min(memory/8, 16<<20) }

// runCgroup is the cgroup of one execution.
type runCgroup interface {
	// SetLimits sets the memory, process and CPU limits.
	SetLimits(lim cgroupLimits) error
	// Add moves process pid into the cgroup.
	Add(pid int) error
	// Contains reports whether process pid is in the cgroup.
	Contains(pid int) bool
	// Stats reads accounting; call it before Destroy.
	Stats() cgroupStats
	// Kill sends SIGKILL to every process left in the cgroup.
	Kill()
	// Destroy kills what is left and removes the cgroup.
	Destroy() error
}

type cgroupStats struct {
	OOMKills   int64
	PeakMemory int64
	CPUTime    time.Duration
}

func cgroupLimitsOf(l sandbox.Limits) cgroupLimits {
	return cgroupLimits{Memory: l.Memory, Pids: l.Processes, CPUs: l.CPUs}
}

const cgroupParentName = "codeagent"

// isRunPath reports whether a path from /proc/PID/cgroup is run cgroup id.
func isRunPath(path, id string) bool {
	return strings.HasSuffix(path, "/"+cgroupParentName+"/"+id)
}

func randomID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// runCgroupID names a run's cgroup: this process's tag (see procid.Tag),
// so that a later process knows whose it is, and a random part.
func runCgroupID() string { return procid.Self().Tag() + "-" + randomID() }

// mountInfo is one cgroup mount of the mount table.
type mountInfo struct {
	root, point, fstype, super string
}

func cgroupMounts() ([]mountInfo, error) {
	data, err := os.ReadFile("/proc/thread-self/mountinfo") // this thread: see package osthread
	if err != nil {
		return nil, err
	}
	var out []mountInfo
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		// id parent maj:min root point opts [optional...] - fstype source super
		line := sc.Text()
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		f, g := strings.Fields(pre), strings.Fields(post)
		if len(f) < 5 || len(g) < 3 || (g[0] != "cgroup" && g[0] != "cgroup2") {
			continue
		}
		out = append(out, mountInfo{root: stagingfs.UnescapeMount(f[3]), point: stagingfs.UnescapeMount(f[4]), fstype: g[0], super: g[2]})
	}
	return out, sc.Err()
}

// selfCgroups maps each v1 controller (and "" for v2) to this process's path.
func selfCgroups() (map[string]string, error) { return procCgroups("self") }

// procCgroups maps each v1 controller (and "" for v2) to the cgroup path of
// process pid ("self" for this one).
func procCgroups(pid string) (map[string]string, error) {
	data, err := os.ReadFile("/proc/" + pid + "/cgroup")
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[1] == "" {
			out[""] = parts[2]
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			out[c] = parts[2]
		}
	}
	return out, nil
}

// hostPath turns a cgroup path as /proc/self/cgroup shows it into a path in
// the mounted hierarchy m.
func hostPath(m mountInfo, cg string) string {
	rel := cg
	if m.root != "/" {
		rel = strings.TrimPrefix(cg, m.root)
	}
	return filepath.Join(m.point, rel)
}

// detectCgroups returns the best manager this host offers, or an error saying
// why none is usable. cgroup v2 is used when its memory and pids controllers
// are available; otherwise v1 with memory, pids and cpuacct hierarchies.
func detectCgroups() (cgroupManager, error) {
	mounts, err := cgroupMounts()
	if err != nil {
		return nil, fmt.Errorf("read mounts: %w", err)
	}
	self, err := selfCgroups()
	if err != nil {
		return nil, fmt.Errorf("read own cgroup: %w", err)
	}
	var v2err error
	for _, m := range mounts {
		if m.fstype == "cgroup2" {
			mgr, err := newCgroupV2(m, self[""])
			if err == nil {
				return mgr, nil
			}
			v2err = err
		}
	}
	mgr, v1err := newCgroupV1(mounts, self)
	if v1err == nil {
		return mgr, nil
	}
	if v2err != nil {
		return nil, fmt.Errorf("cgroup v2: %v; cgroup v1: %v", v2err, v1err)
	}
	return nil, v1err
}

func writeFile(path, value string) error {
	return os.WriteFile(path, []byte(value), 0o644)
}

func readInt(path string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	v, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return v
}

// readKeyed returns the value of key in a "key value" per line file.
func readKeyed(path, key string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, " ")
		if ok && k == key {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

// canCreate checks that this process may create cgroups below parent (it
// may exist, made by another user): write access on a writable mount. It
// creates none (a trial group cost 0.5 ms at every start, and its removal
// more in the kernel's workers); the first run's group proves the rest, and
// its error says what failed.
func canCreate(parent string) error {
	if err := unix.Access(parent, unix.W_OK|unix.X_OK); err != nil {
		return fmt.Errorf("create a cgroup below %s: %w", parent, err)
	}
	return nil
}

// killProcs sends SIGKILL to every pid listed in a cgroup.procs file, a few
// rounds over, since a process may fork while it is being killed.
func killProcs(procsFile string) {
	for round := 0; round < 50; round++ {
		b, err := os.ReadFile(procsFile)
		if err != nil || len(bytes.TrimSpace(b)) == 0 {
			return
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil && pid > 0 {
				_ = unix.Kill(pid, unix.SIGKILL)
			}
		}
		time.Sleep(time.Millisecond)
	}
}

// removeDir removes an empty cgroup directory, waiting briefly (200 ms)
// for the kernel to release exiting processes.
func removeDir(dir string) error { return removeDirWithin(dir, 200) }

// removeDirWithin is removeDir waiting up to ms milliseconds.
func removeDirWithin(dir string, ms int) error {
	var err error
	for i := 0; i < ms; i++ {
		err = unix.Rmdir(dir)
		if err == nil || errors.Is(err, syscall.ENOENT) {
			return nil
		}
		if !errors.Is(err, syscall.EBUSY) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	return fmt.Errorf("remove cgroup %s: %w", dir, err)
}

// sweepStale removes the run cgroups left under parent by a crashed
// process: those named with a dead process's tag at once (killing what is
// left in them), untagged ones (of an older codeagent) once empty and
// older than a minute, so that a group another process has just created
// is left alone. Groups of live processes are never touched.
func sweepStale(parent string) {
	entries, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		dir := filepath.Join(parent, e.Name())
		alive, tagged := procid.TagAlive(e.Name(), "")
		switch {
		case tagged && !alive:
			// Processes killed with their owner may take a while to exit
			// (their mount namespace, with its file systems, goes last);
			// frozen ones (a kernel stopped for a sync) only once thawed.
			thawDir(dir)
			killProcs(filepath.Join(dir, "cgroup.procs"))
			_ = removeDirWithin(dir, 5000)
		case tagged:
		default:
			if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) > time.Minute {
				_ = unix.Rmdir(dir)
			}
		}
	}
}
