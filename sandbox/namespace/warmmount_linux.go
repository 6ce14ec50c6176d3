//go:build linux && (amd64 || arm64)

// This file is the warm interpreters' (see warm_linux.go): what an
// execution adds to a warm interpreter's sandbox, which was set up without
// a workspace. It uses the isolation code's ways into a sandbox: setns into
// its mount namespace from a thread of its own (osthread, as attachWorkspace
// and inMountNamespace do), move_mount of detached trees made on the host
// (the workspace's, nosuid and nodev; a read-only tmpfs with the files),
// fspick to resize its /tmp and /dev/shm, and the run cgroup's accounting
// files (running_linux.go).

package namespace

import (
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/sandbox/internal/osthread"
)

// sandboxMounts is what an execution adds to a warm interpreter's mount
// namespace.
type sandboxMounts struct {
	wsTree   int    // the workspace's detached mount (or its overlay's), for /workspace
	code     int    // a detached read-only tmpfs with the files, mounted at /code
	tmpSize  int64  // the size of /tmp
	shmSize  int64  // the size of /dev/shm
	codePath string // where code goes: /code
}

// mountInto attaches m in the mount namespace of process pid. As in
// attachWorkspace, the namespace is entered by a thread of its own that
// ends afterwards, so no other goroutine ever runs in it; paths are
// resolved from that namespace's root, the sandbox's.
func mountInto(pid int, m sandboxMounts) error {
	tree := m.wsTree
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}
	if err := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, &attr); err != nil {
		return fmt.Errorf("make the workspace nosuid: %w", err)
	}
	ns, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/ns/mnt", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open the sandbox's mount namespace: %w", err)
	}
	defer unix.Close(ns)
	return osthread.Run(func() error {
		if err := unix.Unshare(unix.CLONE_FS); err != nil {
			return fmt.Errorf("unshare fs: %w", err)
		}
		if err := unix.Setns(ns, unix.CLONE_NEWNS); err != nil {
			return fmt.Errorf("enter the sandbox's mount namespace: %w", err)
		}
		if err := unix.MoveMount(tree, "", unix.AT_FDCWD, sandbox.WorkspacePath, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
			return fmt.Errorf("attach the workspace: %w", err)
		}
		if err := unix.MoveMount(m.code, "", unix.AT_FDCWD, m.codePath, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
			return fmt.Errorf("attach the files: %w", err)
		}
		if err := resizeTmpfs("/tmp", m.tmpSize); err != nil {
			return err
		}
		return resizeTmpfs("/dev/shm", m.shmSize)
	})
}

// resizeTmpfs sets the size of the tmpfs mounted at dir.
func resizeTmpfs(dir string, size int64) error {
	fd, err := unix.Fspick(unix.AT_FDCWD, dir, unix.FSPICK_CLOEXEC|unix.FSPICK_NO_AUTOMOUNT|unix.FSPICK_SYMLINK_NOFOLLOW)
	if err != nil {
		return fmt.Errorf("resize %s: %w", dir, err)
	}
	defer unix.Close(fd)
	if err := unix.FsconfigSetString(fd, "size", strconv.FormatInt(size, 10)); err != nil {
		return fmt.Errorf("resize %s: %w", dir, err)
	}
	if err := unix.FsconfigReconfigure(fd); err != nil {
		return fmt.Errorf("resize %s: %w", dir, err)
	}
	return nil
}

// codeMount makes a detached read-only tmpfs holding files, whose paths
// all lie below /code, and returns its mount descriptor. Its pages are
// charged to codeagent, not to the sandbox, as bwrap's --ro-bind-data
// files are.
func codeMount(files []sandbox.File) (int, error) {
	var total int64
	for _, f := range files {
		total += int64(len(f.Data)) + 4096
	}
	fs, err := unix.Fsopen("tmpfs", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return -1, fmt.Errorf("make /code: %w", err)
	}
	defer unix.Close(fs)
	for _, kv := range [][2]string{{"size", strconv.FormatInt(total+1<<20, 10)}, {"mode", "0755"}, {"nr_inodes", strconv.Itoa(4*len(files) + 64)}} {
		if err := unix.FsconfigSetString(fs, kv[0], kv[1]); err != nil {
			return -1, fmt.Errorf("make /code: %s: %w", kv[0], err)
		}
	}
	if err := unix.FsconfigCreate(fs); err != nil {
		return -1, fmt.Errorf("make /code: %w", err)
	}
	mnt, err := unix.Fsmount(fs, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
	if err != nil {
		return -1, fmt.Errorf("make /code: %w", err)
	}
	if err := writeCode(mnt, files); err != nil {
		unix.Close(mnt)
		return -1, err
	}
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
	if err := unix.MountSetattr(mnt, "", unix.AT_EMPTY_PATH, &attr); err != nil {
		unix.Close(mnt)
		return -1, fmt.Errorf("make /code read-only: %w", err)
	}
	return mnt, nil
}

// writeCode creates files in the tmpfs whose root is open as root,
// never following a link (nothing else writes to it).
func writeCode(root int, files []sandbox.File) error {
	for _, f := range files {
		rel := strings.TrimPrefix(f.Path, "/code/")
		dir := root
		parts := strings.Split(path.Dir(rel), "/")
		if path.Dir(rel) == "." {
			parts = nil
		}
		var opened []int
		closeAll := func() {
			for _, fd := range opened {
				unix.Close(fd)
			}
		}
		for _, p := range parts {
			if err := unix.Mkdirat(dir, p, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
				closeAll()
				return fmt.Errorf("write %s: %w", f.Path, err)
			}
			fd, err := unix.Openat(dir, p, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				closeAll()
				return fmt.Errorf("write %s: %w", f.Path, err)
			}
			opened = append(opened, fd)
			dir = fd
		}
		fd, err := unix.Openat(dir, path.Base(rel), unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o444)
		if err == nil {
			for data := f.Data; len(data) > 0 && err == nil; {
				var n int
				n, err = unix.Write(fd, data)
				data = data[n:]
			}
			unix.Close(fd)
		}
		closeAll()
		if err != nil {
			return fmt.Errorf("write %s: %w", f.Path, err)
		}
	}
	return nil
}

// restartPeak makes the cgroup's peak memory start from its usage now
// (cgroup v1, and v2 on kernels from 6.12; older v2 kernels keep the
// warm-up's peak, which the interpreter still holds anyway).
func restartPeak(cg runCgroup) {
	if f, ok := filesOf(cg); ok {
		_ = writeFile(f.peak, f.resetPeak)
	}
}
