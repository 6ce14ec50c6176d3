package stagingfs

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
)

// Images a process makes are named after it (boot, pid and start time), so
// that Sweep can tell those of a process that is gone.

var imageSeq atomic.Int64

// NewImage creates an empty image file in dir, named after this process.
func NewImage(dir string) (*os.File, error) {
	name := fmt.Sprintf("%s-%d-%s-%d.img", bootID(), os.Getpid(), startTime(os.Getpid()), imageSeq.Add(1))
	return os.OpenFile(filepath.Join(dir, name), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
}

// Sweep removes the images in dir whose process no longer runs: what a
// crash left between an image's creation and its removal. It returns how
// many it removed.
func Sweep(dir string) int {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	boot, n := bootID(), 0
	for _, e := range entries {
		f := strings.Split(strings.TrimSuffix(e.Name(), ".img"), "-")
		if !strings.HasSuffix(e.Name(), ".img") || len(f) != 4 || !e.Type().IsRegular() {
			continue
		}
		if pid, err := strconv.Atoi(f[1]); err == nil && f[0] == boot && startTime(pid) == f[2] {
			continue // its process still runs
		}
		if os.Remove(filepath.Join(dir, e.Name())) == nil {
			n++
		}
	}
	return n
}

// bootID is the first field of this boot's id.
func bootID() string {
	b, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	id, _, _ := strings.Cut(strings.TrimSpace(string(b)), "-")
	return id
}

// startTime is field 22 of /proc/PID/stat, or "" when pid does not exist.
func startTime(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
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
