//go:build linux && (amd64 || arm64)

package namespace

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/codeagent/codeagent/procid"
	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/sandbox/internal/osthread"
)

// Run as root, the backend does not let programs act as host root. bwrap
// runs as a host uid of codeagent's own, one per sandbox (from the range
// that starts at Config.HostUID, by default backendkit.DefaultHostUID; see
// package hostids), so the user namespace it creates belongs to that uid
// and per-user kernel quotas are charged to that sandbox alone; codeagent
// writes the namespace's map itself (bwrap's --userns-block-fd) so that
// the program's uid 1000 is that host uid and no other id is mapped. The
// workspace is shown to it through an idmapped mount (idmap_linux.go), and
// what it writes is brought into the workspace by the merge, which gives
// new entries the workspace's owner (package wsperm); the seccomp filter
// refuses setuid and setgid modes, so nothing it leaves behind lets anyone
// gain a uid.
//
// That uid cannot look up the caller's paths (a workspace below /root, say),
// so bwrap gets the workspace from a mount codeagent makes for it: each
// launcher starts in a private mount namespace of its own (made while
// still root, before dropping to the uid), and before bwrap reads its
// options codeagent clones the workspace from its descriptor (open_tree)
// and moves the clone onto a fixed point in that namespace, which the
// host never sees. The path is never looked up again after the descriptor
// was opened without following links.

// rootBaseDirs are where the backend keeps its prepared /etc and mount
// directory when root: bwrap, running as the program's uid, must be able
// to look them up, which a private TMPDIR (0700) would not allow.
var rootBaseDirs = []string{"/run/codeagent", "/var/tmp/codeagent"}

// rootBaseDir returns the first of dirs that is, or can be made, a
// root-owned directory of mode perm, in a root-owned directory, reached
// without links.
func rootBaseDir(dirs []string, perm os.FileMode) (string, error) {
	var errs []error
	for _, d := range dirs {
		if err := os.MkdirAll(d, perm); err != nil {
			errs = append(errs, err)
			continue
		}
		resolved, err := filepath.EvalSymlinks(d)
		if err != nil || resolved != d {
			errs = append(errs, fmt.Errorf("%s is reached through a link", d))
			continue
		}
		var st, parent unix.Stat_t
		if err := unix.Lstat(d, &st); err != nil || st.Uid != 0 {
			errs = append(errs, fmt.Errorf("%s is not owned by root", d))
			continue
		}
		if err := unix.Lstat(filepath.Dir(d), &parent); err != nil || parent.Uid != 0 {
			errs = append(errs, fmt.Errorf("%s is not owned by root", filepath.Dir(d)))
			continue
		}
		if err := os.Chmod(d, perm); err != nil {
			errs = append(errs, err)
			continue
		}
		return d, nil
	}
	return "", errors.Join(errs...)
}

// mountPoint is where, in a launcher's private mount namespace, the
// workspace is attached for bwrap to bind: a directory of a 0711 root-owned
// directory the backend creates.
func (b *Backend) mountPoint() string { return filepath.Join(b.mnt, "ws") }

// prepareMountDir makes the backend's directory for the workspace mount
// point and the files that mask /proc entries.
func prepareMountDir(tmp string) (string, error) {
	dir, err := os.MkdirTemp(tmp, procid.Prefix(mntPrefix))
	if err != nil {
		return "", err
	}
	err = errors.Join(os.Chmod(dir, 0o711), os.Mkdir(filepath.Join(dir, "ws"), 0o755),
		os.Mkdir(filepath.Join(dir, "lower"), 0o700), os.Mkdir(filepath.Join(dir, "up"), 0o700),
		os.Mkdir(filepath.Join(dir, "empty"), 0o555), os.Mkdir(filepath.Join(dir, minimalRootDir), 0o700),
		os.WriteFile(filepath.Join(dir, "empty.txt"), nil, 0o444), os.Mkdir(filepath.Join(dir, "bind"), 0o711))
	for i := 0; err == nil && i < sandbox.MaxBinds; i++ {
		err = os.Mkdir(filepath.Join(dir, "bind", strconv.Itoa(i)), 0o755)
	}
	if err != nil {
		_ = os.RemoveAll(dir)
		return "", err
	}
	return dir, nil
}

// attachWorkspace attaches the workspace open as ws (its directory
// described by st) itself, read-write, at target in the mount namespace of
// launcher l: a clone of its mount without the file systems mounted below
// it, made nosuid and nodev, and idmapped for l's uid (see
// idmapWorkspace), so that what the program creates there belongs to the
// workspace's owner on disk. This is the plain mode, without an overlay:
// the disk watcher alone bounds the workspace.
func (b *Backend) attachWorkspace(l *launcher, ws *os.File, st *unix.Stat_t, target string) error {
	tree, err := cloneWorkspace(ws, 0, false)
	if err != nil {
		return err
	}
	defer unix.Close(tree)
	if err := b.idmapWorkspace(tree, st, l.uid); err != nil {
		return err
	}
	return inMountNamespace(l.cmd.Process.Pid, func() error {
		if err := unix.MoveMount(tree, "", unix.AT_FDCWD, target, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
			return fmt.Errorf("attach the workspace: %w", err)
		}
		return nil
	})
}

// cloneWorkspace clones the mount of the workspace open as ws, with its
// submounts when recursive, made nosuid, nodev and attr (such as
// MOUNT_ATTR_RDONLY), and returns the detached clone.
func cloneWorkspace(ws *os.File, attr uint64, recursive bool) (int, error) {
	flags, rec := unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_EMPTY_PATH, 0
	if recursive {
		flags |= unix.AT_RECURSIVE
		rec = unix.AT_RECURSIVE
	}
	tree, err := unix.OpenTree(int(ws.Fd()), "", uint(flags))
	if err != nil {
		return -1, fmt.Errorf("clone the workspace mount: %w", err)
	}
	a := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV | attr}
	if err := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH|uint(rec), &a); err != nil {
		unix.Close(tree)
		return -1, fmt.Errorf("make the workspace nosuid: %w", err)
	}
	return tree, nil
}

// inMountNamespace runs fn in the mount namespace of process pid. The
// namespace switch happens on a thread of its own that exits afterwards,
// so no other goroutine ever runs in that namespace; descriptors fn opens
// stay usable.
func inMountNamespace(pid int, fn func() error) error {
	ns, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/ns/mnt", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open the launcher's mount namespace: %w", err)
	}
	defer unix.Close(ns)
	return osthread.Run(func() error {
		if err := unix.Unshare(unix.CLONE_FS); err != nil {
			return fmt.Errorf("unshare fs: %w", err)
		}
		if err := unix.Setns(ns, unix.CLONE_NEWNS); err != nil {
			return fmt.Errorf("enter the launcher's mount namespace: %w", err)
		}
		return fn()
	})
}

// writeIDMaps maps uid and gid 1000 of process pid's new user namespace to
// hostID, and nothing else.
func writeIDMaps(pid, hostID int) error {
	line := []byte(fmt.Sprintf("%d %d 1\n", sandboxUID, hostID))
	for _, f := range []string{"uid_map", "gid_map"} {
		if err := os.WriteFile("/proc/"+strconv.Itoa(pid)+"/"+f, line, 0); err != nil {
			return fmt.Errorf("write %s: %w", f, err)
		}
	}
	return nil
}

// asUID runs fn on a thread of its own whose user and group ids are uid,
// and lets the thread end afterwards. Setting another process's rlimits
// takes either the same ids or CAP_SYS_RESOURCE, which root may lack (as
// in some containers and VMs); the program runs as uid, so matching its
// ids always works.
func asUID(uid int, fn func() error) error {
	return osthread.Run(func() error {
		id := uintptr(uid)
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, id, id, id); e != 0 {
			return fmt.Errorf("setresgid: %w", e)
		}
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, id, id, id); e != 0 {
			return fmt.Errorf("setresuid: %w", e)
		}
		return fn()
	})
}

// forkThread is an OS thread kept for starting launchers. A launcher dies
// with the thread that forked it (PR_SET_PDEATHSIG, Go's and bwrap's
// --die-with-parent), and attachWorkspace and asUID end the threads they
// change, which could be any thread of the process; so launchers are
// forked from a thread that lives as long as the process (see
// golang.org/issue/27505).
var forkThread = struct {
	once sync.Once
	req  chan func()
}{req: make(chan func())}

// startOnForkThread starts cmd from forkThread.
func startOnForkThread(cmd *exec.Cmd) error {
	forkThread.once.Do(func() {
		go func() {
			runtime.LockOSThread()
			for f := range forkThread.req {
				f()
			}
		}()
	})
	errc := make(chan error, 1)
	forkThread.req <- func() { errc <- cmd.Start() }
	return <-errc
}
