package workspace

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/codeagent/codeagent/internal/nofollow"
)

// Walks of a directory on the host (snapshots, usage, removal) stay on the
// file system of the directory they start from: a directory below it on
// which another file system is mounted (host data bound into a workspace,
// a mount a backend left behind) is skipped, never descended into, so that
// codeagent neither lists, copies out, counts nor deletes what lies there.

// skippedMount is the reason a snapshot gives for such a directory.
const skippedMount = "another file system is mounted here; not descended into"

// mountGuard tells whether a directory met in a walk through root lies on
// root's own mount.
type mountGuard struct {
	root *os.Root
	id   nofollow.MountID
}

func newMountGuard(root *os.Root) (*mountGuard, error) {
	f, err := root.OpenFile(".", unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	id, err := nofollow.MountOf(int(f.Fd()))
	if err != nil {
		return nil, fmt.Errorf("stat %s: %w", root.Name(), err)
	}
	return &mountGuard{root: root, id: id}, nil
}

// elsewhere reports whether the directory rel, met in the walk as d, lies
// on another mount than the root. The device, from the walk's lstat, tells
// most; a bind mount of the same file system needs the directory opened
// (O_PATH, without following a link) for its mount ID. An error means the
// walk cannot tell and should not descend either.
func (g *mountGuard) elsewhere(rel string, d fs.DirEntry) (bool, error) {
	fi, err := d.Info()
	if err != nil {
		return false, err
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && uint64(st.Dev) != g.id.Dev {
		return true, nil
	}
	if g.id.Mnt == 0 {
		return false, nil
	}
	f, err := g.root.OpenFile(rel, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return false, err
	}
	defer f.Close()
	id, err := nofollow.MountOf(int(f.Fd()))
	if err != nil {
		return false, err
	}
	return !g.id.Same(id), nil
}

// RemoveAll removes dir and everything below it that lies on dir's own
// mount, following no symbolic link (a link is removed, not its target).
// A directory below dir on which another file system is mounted is left
// with all it holds, and the error names it; a missing dir is no error.
// Temporary workspaces go this way, so that host data bound into one is
// never deleted with it.
func RemoveAll(dir string) error {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	switch {
	case errors.Is(err, unix.ENOENT):
		return nil
	case errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP):
		if err := unix.Unlink(dir); err != nil && !errors.Is(err, unix.ENOENT) {
			return &os.PathError{Op: "remove", Path: dir, Err: err}
		}
		return nil
	case err != nil:
		return &os.PathError{Op: "open", Path: dir, Err: err}
	}
	id, err := nofollow.MountOf(fd)
	if err != nil {
		unix.Close(fd)
		return &os.PathError{Op: "stat", Path: dir, Err: err}
	}
	if err := removeBelow(fd, dir, id); err != nil {
		return err
	}
	if err := unix.Rmdir(dir); err != nil && !errors.Is(err, unix.ENOENT) {
		return &os.PathError{Op: "remove", Path: dir, Err: err}
	}
	return nil
}

// removeBelow removes what the directory fd (at path dir, which it owns and
// closes) holds on the mount id, and returns the first error.
func removeBelow(fd int, dir string, id nofollow.MountID) error {
	f := os.NewFile(uintptr(fd), dir)
	defer f.Close()
	var first error
	keep := func(err error) {
		if first == nil {
			first = err
		}
	}
	for {
		names, err := f.Readdirnames(1024)
		for _, name := range names {
			err := unix.Unlinkat(fd, name, 0)
			if err == nil || errors.Is(err, unix.ENOENT) {
				continue
			}
			p := filepath.Join(dir, name)
			var st unix.Stat_t
			if !errors.Is(err, unix.EISDIR) && (!errors.Is(err, unix.EPERM) ||
				unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR) {
				keep(&os.PathError{Op: "remove", Path: p, Err: err})
				continue
			}
			sub, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				keep(&os.PathError{Op: "open", Path: p, Err: err})
				continue
			}
			if sid, err := nofollow.MountOf(sub); err != nil || !id.Same(sid) {
				unix.Close(sub)
				keep(fmt.Errorf("%s: another file system is mounted there; left in place", p))
				continue
			}
			if err := removeBelow(sub, p, id); err != nil {
				keep(err)
				continue
			}
			if err := unix.Unlinkat(fd, name, unix.AT_REMOVEDIR); err != nil && !errors.Is(err, unix.ENOENT) {
				keep(&os.PathError{Op: "remove", Path: p, Err: err})
			}
		}
		if errors.Is(err, io.EOF) || len(names) == 0 {
			return first
		}
		if err != nil {
			keep(&os.PathError{Op: "readdir", Path: dir, Err: err})
			return first
		}
	}
}
