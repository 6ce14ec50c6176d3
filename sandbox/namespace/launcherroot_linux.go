//go:build linux && (amd64 || arm64)

package namespace

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/codeagent/codeagent/sandbox/internal/osthread"
)

// A launcher run as root has a private mount namespace of its own (see
// attachWorkspace). bwrap reads the whole mount table
// (/proc/self/mountinfo) after each of its binds, two dozen per sandbox,
// so its setup costs grow with the mounts it sees: container engines,
// kubelets and loop-mounted file systems add hundreds to the host's, and
// each hundred cost about 2 ms per execution here. So the launcher's
// namespace is not a copy of the host's but has a root of its own that
// holds only what bwrap binds into sandboxes, at the same paths: the
// sandbox sees exactly what it saw before, and bwrap's mount table has a
// dozen entries. The launcher is born in it (startInMinimalRoot).

// minimalRootDir is where, below the backend's mount directory, the
// launcher's new root is assembled (in the launcher's namespace only).
const minimalRootDir = "root"

// rootSources are the host paths bwrap takes anything from: every source
// of the layout's binds, /proc and /dev (bwrap's --proc needs a visible
// procfs, --dev binds a few device nodes, and the upper file systems'
// loop devices are opened there).
func (b *Backend) rootSources() []string {
	paths := []string{"/usr"}
	for _, d := range rootDirs {
		if fi, err := os.Lstat(d); err == nil && fi.IsDir() {
			paths = append(paths, d)
		}
	}
	return append(paths, b.etc, b.mnt, "/proc", "/dev")
}

// startInMinimalRoot starts cmd from an OS thread of its own that first
// makes itself a private mount namespace whose root is a small tmpfs into
// which each of rootSources is bound at its own path, the old tree
// detached: the launcher inherits it and never sees the host's tree, not
// even while its dynamic loader runs. The namespace is private (no
// propagation), so nothing here reaches the host. A launcher dies with the
// thread that forked it (PR_SET_PDEATHSIG), so the thread waits, locked,
// until the returned end is called, then ends with its namespace.
func (b *Backend) startInMinimalRoot(cmd *exec.Cmd) (end func(), err error) {
	errc := make(chan error, 1)
	done := make(chan struct{})
	osthread.Go(func() {
		err := b.enterMinimalRoot()
		if err == nil {
			err = cmd.Start()
		}
		errc <- err
		if err == nil {
			<-done
		}
	})
	if err := <-errc; err != nil {
		return nil, err
	}
	return sync.OnceFunc(func() { close(done) }), nil
}

// enterMinimalRoot gives the calling thread, locked and never reused, the
// launcher's mount namespace (see startInMinimalRoot) and its network
// namespace: a fresh one with the loopback interface up and nothing else,
// which the sandbox keeps (bwrap runs without --unshare-net). Made here, it
// is ready before bwrap has its options, off the path of a warm run, and
// it belongs to the host's user namespace, so that nothing in the sandbox
// has any capability over it.
func (b *Backend) enterMinimalRoot() error {
	if err := unix.Unshare(unix.CLONE_FS | unix.CLONE_NEWNS | unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("unshare the launcher's mount and network namespaces: %w", err)
	}
	if err := loopbackUp(); err != nil {
		return fmt.Errorf("the launcher's network namespace: %w", err)
	}
	if err := unix.Mount("none", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make the launcher's mount namespace private: %w", err)
	}
	newRoot := filepath.Join(b.mnt, minimalRootDir)
	if err := unix.Mount("tmpfs", newRoot, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size=64k"); err != nil {
		return fmt.Errorf("mount the launcher's root: %w", err)
	}
	for _, src := range b.rootSources() {
		dst := filepath.Join(newRoot, src)
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return err
		}
		// The trees of /usr and the like with their submounts, as bwrap
		// binds them; the procfs and the device nodes themselves; the
		// backend's own directories, which have no submounts yet (and one
		// of them holds newRoot).
		flags := uintptr(unix.MS_BIND)
		if src != "/dev" && src != "/proc" && src != b.etc && src != b.mnt {
			flags |= unix.MS_REC
		}
		if err := unix.Mount(src, dst, "", flags, ""); err != nil {
			return fmt.Errorf("bind %s into the launcher's root: %w", src, err)
		}
	}
	// The host's top-level links (/lib64 -> usr/lib64 on a merged /usr),
	// for the dynamic loader of bwrap, which starts in this root.
	for _, d := range rootDirs {
		if target, err := os.Readlink(d); err == nil {
			if err := os.Symlink(target, filepath.Join(newRoot, d)); err != nil {
				return err
			}
		}
	}
	// bwrap mounts its own tmpfs over /tmp to build the sandbox's root.
	if err := os.Mkdir(filepath.Join(newRoot, "tmp"), 0o755); err != nil {
		return err
	}
	if err := unix.Chdir(newRoot); err != nil {
		return err
	}
	if err := unix.PivotRoot(".", "."); err != nil {
		return fmt.Errorf("pivot the launcher's root: %w", err)
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detach the host's tree: %w", err)
	}
	return unix.Chdir("/")
}

// loopbackUp brings up the loopback interface of the calling thread's
// network namespace, as bwrap does in the namespaces it makes.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("loopback flags: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("bring the loopback interface up: %w", err)
	}
	return nil
}
