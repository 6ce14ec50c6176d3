//go:build linux && (amd64 || arm64)

package namespace

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// A launcher run as root starts in a private copy of the host's mount
// namespace (see attachWorkspace). bwrap reads the whole mount table
// (/proc/self/mountinfo) after each of its binds, two dozen per sandbox,
// so its setup costs grow with the host's mounts: container engines,
// kubelets and loop-mounted file systems add hundreds, and each hundred
// cost about 2 ms per execution here. Before bwrap reads its options,
// minimalRoot therefore gives the launcher's namespace a root of its own
// that holds only what bwrap binds into sandboxes, at the same paths:
// the sandbox sees exactly what it saw before, and bwrap's mount table
// has a dozen entries instead of the host's.

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

// minimalRoot replaces the root of the mount namespace of the launcher
// pid with a small tmpfs into which each of rootSources is bound at its
// own path, and detaches the old tree. pivot_root moves the launcher's
// root and working directory (both "/") with it. The launcher's namespace
// is private (Go makes it MS_PRIVATE), so nothing here reaches the host.
func (b *Backend) minimalRoot(pid int) error {
	newRoot := filepath.Join(b.mnt, minimalRootDir)
	return inMountNamespace(pid, func() error {
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
			// backend's own directories, which have no submounts yet (and
			// one of them holds newRoot).
			flags := uintptr(unix.MS_BIND)
			if src != "/dev" && src != "/proc" && src != b.etc && src != b.mnt {
				flags |= unix.MS_REC
			}
			if err := unix.Mount(src, dst, "", flags, ""); err != nil {
				return fmt.Errorf("bind %s into the launcher's root: %w", src, err)
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
	})
}
