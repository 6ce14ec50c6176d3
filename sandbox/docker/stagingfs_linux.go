package docker

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/sandbox/internal/diskwatch"
)

// A staging file system puts a hard bound on what a program can write to
// its workspace: each box's staging directory lies on an ext4 file system
// of its own, in a sparse image file attached to a loop device, created
// with the container (so in the background for a warm pool). Its size is
// the class's disk limit plus stagingRoom for the workspace copied in;
// a file outside the staging directory takes the space beyond what the run
// may write (see fit): made with the file system for an empty workspace
// and the default file size, and adjusted before the program starts. The
// image only takes
// host disk for what is written, and what is written is bounded by the
// file system: fallocate, sparse files, directories, links, whatever a
// program creates.
const stagingRoom = 1 << 30

// stagingInodes is the file system's inode count: what the watcher lets a
// run add, and room for the workspace copied in.
const stagingInodes = diskwatch.MaxEntries + 128<<10

// stagingFS is a box's staging file system, mounted at dir; the box's
// staging directory is dir/ws.
type stagingFS struct {
	dir string
	dev uint64 // st_dev of the mounted file system
}

// stagingUsable says why staging file systems cannot be made here, or nil.
// They need root (loop devices and mounts) and mke2fs.
func stagingUsable() error {
	if os.Geteuid() != 0 {
		return errors.New("not root")
	}
	if _, err := exec.LookPath("mke2fs"); err != nil {
		return err
	}
	f, err := os.OpenFile("/dev/loop-control", os.O_RDWR, 0)
	if err != nil {
		return err
	}
	return f.Close()
}

// mountStaging makes and mounts a staging file system for a box in boxDir
// whose runs may write disk bytes.
func mountStaging(boxDir string, disk int64) (*stagingFS, error) {
	img := filepath.Join(boxDir, "fs.img")
	f, err := os.OpenFile(img, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if err := f.Truncate((disk + stagingRoom + 4095) &^ 4095); err != nil {
		return nil, err
	}
	out, err := exec.Command("mke2fs", "-q", "-F", "-t", "ext4", "-b", "4096", "-m", "0",
		"-O", "^has_journal,^resize_inode", "-N", strconv.Itoa(stagingInodes),
		"-E", "lazy_itable_init=1,nodiscard", img).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("mke2fs: %v: %s", err, strings.TrimSpace(string(out)))
	}
	dev, err := attachLoop(f)
	if err != nil {
		return nil, err
	}
	defer dev.Close() // the device detaches when unmounted (autoclear)
	dir := filepath.Join(boxDir, "fs")
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, err
	}
	if err := unix.Mount(dev.Name(), dir, "ext4", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOATIME, "noinit_itable,errors=remount-ro"); err != nil {
		return nil, fmt.Errorf("mount %s: %w", dev.Name(), err)
	}
	s := &stagingFS{dir: dir}
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
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

// attachLoop attaches img to a free loop device, with direct I/O where the
// kernel allows it (the image's pages are not cached twice).
func attachLoop(img *os.File) (*os.File, error) {
	ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	defer ctl.Close()
	for try := 0; try < 10; try++ {
		n, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
		if err != nil {
			return nil, fmt.Errorf("find a free loop device: %w", err)
		}
		dev, err := os.OpenFile("/dev/loop"+strconv.Itoa(n), os.O_RDWR, 0)
		if err != nil {
			return nil, err
		}
		cfg := unix.LoopConfig{Fd: uint32(img.Fd()), Size: 4096}
		cfg.Info.Flags = unix.LO_FLAGS_AUTOCLEAR | unix.LO_FLAGS_DIRECT_IO
		err = unix.IoctlLoopConfigure(int(dev.Fd()), &cfg)
		if errors.Is(err, unix.EINVAL) {
			cfg.Info.Flags = unix.LO_FLAGS_AUTOCLEAR
			err = unix.IoctlLoopConfigure(int(dev.Fd()), &cfg)
		}
		if err == nil {
			return dev, nil
		}
		dev.Close()
		if !errors.Is(err, unix.EBUSY) {
			return nil, fmt.Errorf("attach loop device: %w", err)
		}
	}
	return nil, errors.New("attach loop device: all busy")
}

func (s *stagingFS) unmount() {
	_ = unix.Unmount(s.dir, unix.MNT_DETACH)
}

// fit leaves free bytes of the file system's space to the program: the
// reserve file outside the staging directory grows or shrinks to hold the
// rest. It returns how many more inodes the file system can hold.
func (s *stagingFS) fit(free int64) (int, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(s.dir, &st); err != nil {
		return 0, err
	}
	f, err := os.OpenFile(filepath.Join(s.dir, "reserve"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	switch avail := int64(st.Bavail) * st.Bsize; {
	case avail > free:
		if err := unix.Fallocate(int(f.Fd()), 0, fi.Size(), avail-free); err != nil {
			return 0, fmt.Errorf("reserve staging space: %w", err)
		}
	case avail < free && fi.Size() > 0:
		if err := f.Truncate(max(0, fi.Size()-(free-avail))); err != nil {
			return 0, err
		}
	}
	return int(st.Ffree), nil
}

// release gives the whole file system to what is staged in next.
func (s *stagingFS) release() error {
	return os.Truncate(filepath.Join(s.dir, "reserve"), 0)
}

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
func unmountBelow(dir string) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return
	}
	var points []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 {
			p := unescapeMount(fields[4])
			if p == dir || strings.HasPrefix(p, dir+"/") {
				points = append(points, p)
			}
		}
	}
	f.Close()
	sort.Sort(sort.Reverse(sort.StringSlice(points)))
	for _, p := range points {
		_ = unix.Unmount(p, unix.MNT_DETACH)
	}
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
