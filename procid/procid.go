// Package procid names a process across processes and reboots: the host
// name, the kernel's boot id, the pid and the pid's start time. A lease in
// the store, a temporary directory or a cgroup carries the name of the
// process that made it, so that a later process can tell the leftovers of a
// dead one (removed, taken over) from those of a live one (never touched).
package procid

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
)

// Owner identifies one process.
type Owner struct {
	Host  string `json:"host"`
	Boot  string `json:"boot_id"`
	PID   int    `json:"pid"`
	Start string `json:"start"` // field 22 of /proc/PID/stat: clock ticks since boot
}

var (
	selfOnce sync.Once
	self     Owner
)

// Self is this process.
func Self() Owner {
	selfOnce.Do(func() {
		host, _ := os.Hostname()
		self = Owner{Host: host, Boot: BootID(), PID: os.Getpid(), Start: StartTime(os.Getpid())}
	})
	return self
}

// String is the owner as host/boot/pid/start.
func (o Owner) String() string { return fmt.Sprintf("%s/%s/%d/%s", o.Host, o.Boot, o.PID, o.Start) }

// Describe is the owner for people: "pid 123 on host h".
func (o Owner) Describe() string { return fmt.Sprintf("pid %d on host %s", o.PID, o.Host) }

// Parse reads what String wrote.
func Parse(s string) (Owner, error) {
	f := strings.Split(s, "/")
	if len(f) != 4 {
		return Owner{}, fmt.Errorf("invalid owner %q", s)
	}
	pid, err := strconv.Atoi(f[2])
	if err != nil || pid <= 0 {
		return Owner{}, fmt.Errorf("invalid owner %q", s)
	}
	return Owner{Host: f[0], Boot: f[1], PID: pid, Start: f[3]}, nil
}

// Local reports whether o ran on this host since its last boot, where its
// liveness can be checked.
func (o Owner) Local() bool {
	host, _ := os.Hostname()
	return o.Host == host && o.Boot == BootID()
}

// Alive reports whether the process o names still runs, or may: an owner
// on another host is assumed alive (its lease's expiry decides), one of an
// earlier boot of this host is dead.
func (o Owner) Alive() bool {
	host, _ := os.Hostname()
	if o.Host != host {
		return true
	}
	if o.Boot != BootID() {
		return false
	}
	return o.Start != "" && StartTime(o.PID) == o.Start
}

// BootID is the kernel's boot id.
func BootID() string {
	b, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	return strings.TrimSpace(string(b))
}

// StartTime is field 22 of /proc/PID/stat, or "" when pid does not exist.
func StartTime(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return ""
	}
	return f[19]
}

// Tag is a short form of the owner for file and cgroup names on this
// host: pid.start.boot, the boot id cut to 8 hex digits of its hash.
func (o Owner) Tag() string {
	return fmt.Sprintf("%d.%s.%s", o.PID, o.Start, bootTag(o.Boot))
}

func bootTag(boot string) string {
	h := sha256.Sum256([]byte(boot))
	return hex.EncodeToString(h[:4])
}

// TagAlive reads a Tag at the start of name (after prefix, up to the next
// "-") and reports whether it names a live process of this host. ok is
// false when name carries no tag (a name of an older codeagent).
func TagAlive(name, prefix string) (alive, ok bool) {
	rest, found := strings.CutPrefix(name, prefix)
	if !found {
		return false, false
	}
	tag, _, _ := strings.Cut(rest, "-")
	f := strings.Split(tag, ".")
	if len(f) != 3 {
		return false, false
	}
	pid, err := strconv.Atoi(f[0])
	if err != nil || pid <= 0 || f[1] == "" || len(f[2]) != 8 {
		return false, false
	}
	if f[2] != bootTag(BootID()) {
		return false, true // made before this boot
	}
	return StartTime(pid) == f[1], true
}
