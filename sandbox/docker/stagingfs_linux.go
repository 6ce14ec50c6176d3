package docker

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/sandbox/internal/diskwatch"
	"github.com/codeagent/codeagent/sandbox/internal/stagingfs"
)

// A staging file system puts a hard bound on what a program can write to
// its workspace: each box's staging directory lies on an ext4 file system
// of its own (package stagingfs), created with the container (so in the
// background for a warm pool). Its size is the class's disk limit plus
// stagingRoom for the workspace copied in; the reserve file outside the
// staging directory takes the space beyond what the run may write (see
// fit): made with the file system for an empty workspace and the default
// file size, and adjusted before the program starts.
const stagingRoom = 1 << 30

// stagingInodes is the file system's inode count: what the watcher lets a
// run add, and room for the workspace copied in.
const stagingInodes = diskwatch.MaxEntries + 128<<10

// stagingFS is a box's staging file system, mounted at dir; the box's
// staging directory is dir/ws.
type stagingFS struct {
	dir  string
	root *os.File // dir, open
	dev  uint64   // st_dev of the mounted file system
}

// stagingUsable says why staging file systems cannot be made here, or nil.
func stagingUsable() error { return stagingfs.Usable() }

// mountStaging makes and mounts a staging file system for a box in boxDir
// whose runs may write disk bytes.
func mountStaging(boxDir string, disk int64) (*stagingFS, error) {
	img := filepath.Join(boxDir, "fs.img")
	f, err := os.OpenFile(img, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if err := stagingfs.Format(f, disk+stagingRoom, stagingInodes); err != nil {
		return nil, err
	}
	dev, err := stagingfs.Attach(f)
	if err != nil {
		return nil, err
	}
	defer dev.Close() // the device detaches when unmounted (autoclear)
	dir := filepath.Join(boxDir, "fs")
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, err
	}
	if err := stagingfs.Mount(dev, dir); err != nil {
		return nil, err
	}
	s := &stagingFS{dir: dir}
	if s.root, err = os.Open(dir); err != nil {
		s.unmount()
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(s.root.Fd()), &st); err != nil {
		s.unmount()
		return nil, err
	}
	s.dev = st.Dev
	_ = os.Remove(filepath.Join(dir, "lost+found"))
	if _, err := s.fit(disk + sandbox.DefaultLimits().FileSize/2); err != nil {
		s.unmount()
		return nil, err
	}
	return s, nil
}

func (s *stagingFS) unmount() {
	if s.root != nil {
		s.root.Close()
	}
	_ = unix.Unmount(s.dir, unix.MNT_DETACH)
}

// fit leaves free bytes of the file system's space to the program (see
// stagingfs.Fit) and returns how many more inodes it can hold.
func (s *stagingFS) fit(free int64) (int, error) { return stagingfs.Fit(s.root, free) }

// release gives the whole file system to what is staged in next.
func (s *stagingFS) release() error { return stagingfs.Release(s.root) }

// visibleIn reports whether the process pid (a container's first process)
// has this file system mounted at /workspace: the engine saw the mount.
func (s *stagingFS) visibleIn(pid int) bool {
	f, err := os.Open(fmt.Sprintf("/proc/%d/mountinfo", pid))
	if err != nil {
		return false
	}
	defer f.Close()
	want := fmt.Sprintf("%d:%d", unix.Major(s.dev), unix.Minor(s.dev))
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent major:minor root mountpoint ...
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && fields[4] == "/workspace" {
			return fields[2] == want
		}
	}
	return false
}

// unmountBelow detaches every mount at or below dir, deepest first: the
// staging file systems of boxes, also those a crashed process left.
func unmountBelow(dir string) { stagingfs.UnmountBelow(dir) }
