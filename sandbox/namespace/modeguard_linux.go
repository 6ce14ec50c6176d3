//go:build linux && (amd64 || arm64)

package namespace

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/codeagent/codeagent/sandbox/internal/wsperm"
)

// Where the program writes to the workspace itself (the plain mode: run by
// an ordinary user, or as root without overlays, and a kernel's workspace
// there), no merge stands between its chmods and the host. A modeGuard
// notes every entry's mode before the program runs and, afterwards, takes
// back what package wsperm does not allow: the workspace directory's own
// mode is restored, and group or other write permission that neither the
// workspace directory grants nor the entry had before is removed (setuid
// and setgid modes the seccomp filter refuses already). It works by
// descriptors, confined to the workspace, so that a program still running
// (a kernel between cells) cannot turn it elsewhere.

// maxGuarded bounds the entries a guard notes.
const maxGuarded = 200_000

type inodeID struct{ dev, ino uint64 }

type modeGuard struct {
	root  wsperm.Root
	rootM uint32
	modes map[inodeID]uint32 // 0o7777 bits before the program
	// partial says that not every entry was noted (past maxGuarded, or
	// below a directory that could not be read): an entry not noted may
	// be the user's own, and is left as it is.
	partial bool
}

// guardModes notes the modes of the workspace open as ws (O_PATH).
func guardModes(ws *os.File) (*modeGuard, error) {
	fd, err := openBeneath(int(ws.Fd()), "")
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, err
	}
	g := &modeGuard{root: wsperm.NewRoot(st.Uid, st.Gid, st.Mode), rootM: st.Mode & 0o7777, modes: map[inodeID]uint32{}}
	err = walkSameDev(fd, st.Dev, "", func(dir int, _, name string, st *unix.Stat_t) error {
		if len(g.modes) >= maxGuarded {
			return errStopWalk
		}
		g.modes[inodeID{st.Dev, st.Ino}] = st.Mode & 0o7777
		return nil
	})
	g.partial = err != nil
	return g, nil
}

// restore takes back what the program may not leave: see modeGuard.
func (g *modeGuard) restore(ws *os.File) error {
	root := func(wfd int) error {
		var st unix.Stat_t
		if err := unix.Fstat(wfd, &st); err != nil {
			return err
		}
		var errs []error
		if st.Mode&0o7777 != g.rootM {
			errs = append(errs, unix.Fchmod(wfd, g.rootM))
		}
		errs = append(errs, walkSameDev(wfd, st.Dev, "", func(dir int, _, name string, st *unix.Stat_t) error {
			kind := st.Mode & unix.S_IFMT
			if kind != unix.S_IFDIR && kind != unix.S_IFREG {
				return nil
			}
			old, noted := g.modes[inodeID{st.Dev, st.Ino}]
			if !noted && g.partial {
				return nil
			}
			allowed := (g.root.Mode | old) & 0o022
			if st.Mode&0o022&^allowed == 0 {
				return nil
			}
			return chmodEntry(dir, name, st, st.Mode&0o7777&^(0o022&^allowed))
		}))
		return errors.Join(errs...)
	}
	if os.Geteuid() == 0 {
		return inWorkspace(context.Background(), int(ws.Fd()), root)
	}
	fd, err := openBeneath(int(ws.Fd()), "")
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return root(fd)
}

// chmodEntry sets the mode of entry name of dir, the file or directory st
// describes, through a descriptor of it: never by name, which a link could
// take elsewhere.
func chmodEntry(dir int, name string, st *unix.Stat_t, mode uint32) error {
	fd, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	byPath := false
	if errors.Is(err, unix.EACCES) {
		// An ordinary user's entry it may not read (mode 0077, say): its
		// inode, through an O_PATH descriptor and /proc's link to it.
		fd, err = unix.Openat(dir, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		byPath = true
	}
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ELOOP) {
		return nil // gone or replaced meanwhile
	}
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	defer unix.Close(fd)
	var now unix.Stat_t
	if err := unix.Fstat(fd, &now); err != nil || now.Dev != st.Dev || now.Ino != st.Ino || now.Mode&unix.S_IFMT != st.Mode&unix.S_IFMT {
		return err
	}
	if byPath {
		return unix.Chmod("/proc/self/fd/"+strconv.Itoa(fd), mode)
	}
	return unix.Fchmod(fd, mode)
}

// walkSameDev calls fn for every entry below directory fd (at path rel,
// "" for the top) with its path, parents first, without following links or
// entering another file system than dev.
func walkSameDev(fd int, dev uint64, rel string, fn func(dir int, rel, name string, st *unix.Stat_t) error) error {
	if strings.Count(rel, "/") >= 256 {
		return errors.New("the workspace is nested too deeply")
	}
	names, err := readNames(fd)
	if err != nil {
		return err
	}
	var errs []error
	for _, name := range names {
		var st unix.Stat_t
		if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			continue // gone meanwhile
		}
		if st.Dev != dev {
			continue // another file system mounted here: not the workspace's
		}
		p := path.Join(rel, name)
		if err := fn(fd, p, name, &st); err != nil {
			if errors.Is(err, errStopWalk) {
				return err
			}
			errs = append(errs, err)
		}
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			sub, err := openBeneath(fd, name)
			if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EXDEV) || errors.Is(err, unix.ELOOP) {
				continue // gone, a mount point, or replaced by a link meanwhile
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", p, err))
				continue
			}
			err = walkSameDev(sub, dev, p, fn)
			unix.Close(sub)
			if errors.Is(err, errStopWalk) {
				return err
			}
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// errStopWalk, returned by a walk's function, ends the walk.
var errStopWalk = errors.New("stop the walk")

// guard notes the modes of the workspace open as ws and returns what
// takes back, once the program is done, what it may not leave (see
// modeGuard); failures are logged.
func (b *Backend) guard(ws *os.File) (restore func()) {
	g, err := guardModes(ws)
	if err != nil {
		b.log.Warn("cannot note the workspace's modes; a program's chmods there stay", "workspace", ws.Name(), "err", err)
		return func() {}
	}
	return func() {
		if err := g.restore(ws); err != nil {
			b.log.Warn("cannot take back the modes a program gave in its workspace", "workspace", ws.Name(), "err", err)
		}
	}
}
