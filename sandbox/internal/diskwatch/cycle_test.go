//go:build linux

package diskwatch

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A program renames a/b to b and then a to b/a. When the watcher reads
// the first rename's MOVED_FROM alone and the rest in its next read, the
// account had a below b and b below a: every later path lookup walked the
// cycle, appending names until codeagent itself ran out of memory (24 GB
// here, the host's OOM killer). Now the account never takes a move that
// would make a cycle, rebuilds from a scan instead, and bounds every walk
// up its parents.
//
// The scenario runs in a child process of this test binary with a 3 GiB
// address-space limit and a deadline, so that a regression fails the test
// instead of exhausting the host.
func TestNoCycleFromOutOfOrderRenames(t *testing.T) {
	if os.Getenv("DISKWATCH_CYCLE_CHILD") == "1" {
		cycleScenario(t)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run", "^TestNoCycleFromOutOfOrderRenames$", "-test.v")
	cmd.Env = append(os.Environ(), "DISKWATCH_CYCLE_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
}

func cycleScenario(t *testing.T) {
	must(t, unix.Setrlimit(unix.RLIMIT_AS, &unix.Rlimit{Cur: 3 << 30, Max: 3 << 30}))
	dir := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(dir, "a/b"), 0o755))
	rootFd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	must(t, err)
	ifd := newInotify(rootFd)
	if ifd < 0 {
		t.Skip("no inotify or openat2")
	}
	tr, err := newTree(rootFd, ifd)
	must(t, err)
	w := &Watcher{t: tr, ifd: ifd, rootFd: rootFd}
	must(t, os.Rename(filepath.Join(dir, "a/b"), filepath.Join(dir, "b")))
	must(t, os.Rename(filepath.Join(dir, "a"), filepath.Join(dir, "b/a")))
	must(t, os.WriteFile(filepath.Join(dir, "b/a/f"), make([]byte, 32<<10), 0o644))
	buf := make([]byte, 64<<10)
	n, err := unix.Read(ifd, buf)
	must(t, err)
	// The first event is a/b's MOVED_FROM: hand it over alone.
	ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[0]))
	first := unix.SizeofInotifyEvent + int(ev.Len)
	if ev.Mask&unix.IN_MOVED_FROM == 0 || first >= n {
		t.Fatalf("first event %#x, %d of %d bytes", ev.Mask, first, n)
	}
	w.handleLocked(buf[:first])
	w.handleLocked(buf[first:n])
	c, names, _ := walk(rootFd)
	if w.t.cost != c || w.t.names != names {
		t.Fatalf("account %d bytes %d names, walk %d bytes %d names", w.t.cost, w.t.names, c, names)
	}
}
