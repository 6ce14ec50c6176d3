//go:build linux && (amd64 || arm64)

package namespace

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/codeagent/codeagent/sandbox/internal/sparse"
)

// mergeUpper brings the workspace up to date with the upper layer of the
// overlay its program ran on, once every process of the sandbox is gone:
// afterwards the workspace holds what the program saw at /workspace.
//
// The upper layer holds what the program changed, in overlayfs's format:
// new and changed entries (a changed file was copied up whole), whiteouts
// (character devices 0/0) where it removed an entry of the workspace,
// opaque directories (trusted.overlay.opaque "y") that replace the
// workspace's directory of that name, and renamed directories of the
// workspace (trusted.overlay.redirect: the directory's path in the
// workspace, absolute from its root or relative to its parent's).
//
// Renamed directories are moved first, deepest first, into a holding
// directory of the workspace, since their paths are those of the workspace
// before the run; the upper layer is then applied from the top: whiteouts
// remove, directories are kept, made or moved into place from the holding
// directory, and files, symbolic links and FIFOs are written anew (under a
// temporary name, then renamed over the old entry, so that other hard links
// of a file the program changed keep the old content, as they did in the
// overlay). Hard links between the program's files are kept. Entries get
// their permission bits (no setuid, setgid or sticky bit), times and the
// program's uid; no extended attribute, owner or device reaches the
// workspace. Every path is opened below a descriptor, one component at a
// time, without following links (RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS), and
// never crosses into another mount.
//
// A run that wrote nothing costs one read of the upper directory.
func mergeUpper(upper, ws *os.File, uid int) error {
	root, err := readUpper(int(upper.Fd()))
	if err != nil {
		return fmt.Errorf("read the upper layer: %w", err)
	}
	wfd, err := openBeneath(int(ws.Fd()), "") // ws is O_PATH
	if err != nil {
		return err
	}
	defer unix.Close(wfd)
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	m := &merger{ws: wfd, uid: uid, links: map[uint64]string{}, tempPrefix: ".codeagent-tmp-" + hex.EncodeToString(rnd[:]) + "-"}
	var wst unix.Stat_t
	if err := unix.Fstat(m.ws, &wst); err != nil {
		return err
	}
	if len(root.children) == 0 {
		if wst.Mode&0o777 != root.st.Mode&0o777 {
			return unix.Fchmod(m.ws, root.st.Mode&0o777)
		}
		return nil
	}
	if err := root.resolveLower("", true); err != nil {
		return err
	}
	if err := m.holdOrigins(root); err != nil {
		return err
	}
	if err := m.applyChildren(root, int(upper.Fd()), m.ws, "", false); err != nil {
		return err
	}
	if m.hold != "" {
		if err := removeAllAt(m.ws, m.hold); err != nil {
			return err
		}
	}
	return errors.Join(unix.Fchmod(m.ws, root.st.Mode&0o777), setTimes(m.ws, "", &root.st))
}

// merger applies an upper layer to the workspace open as ws.
type merger struct {
	ws    int
	uid   int
	hold  string            // the holding directory's name in ws, once made
	links map[uint64]string // upper inode of a file with hard links: its first path in ws

	tempPrefix string // of temporary names, random per merge
	temps      int
}

// holdOrigins moves the directories the program renamed into the holding
// directory, deepest first, and notes where each went; a renamed directory
// whose origin is gone (or is not a directory) starts empty.
func (m *merger) holdOrigins(root *upperEntry) error {
	var renamed []*upperEntry
	var walk func(e *upperEntry)
	walk = func(e *upperEntry) {
		for _, c := range e.children {
			if c.renamed {
				renamed = append(renamed, c)
			}
			walk(c)
		}
	}
	walk(root)
	if len(renamed) == 0 {
		return nil
	}
	sort.SliceStable(renamed, func(i, j int) bool {
		return strings.Count(renamed[i].lower, "/") > strings.Count(renamed[j].lower, "/")
	})
	taken := map[string]bool{}
	for _, c := range root.children {
		taken[c.name] = true
	}
	for {
		var b [8]byte
		_, _ = rand.Read(b[:])
		name := ".codeagent-merge-" + hex.EncodeToString(b[:])
		if taken[name] {
			continue
		}
		err := unix.Mkdirat(m.ws, name, 0o700)
		if errors.Is(err, unix.EEXIST) {
			continue
		}
		if err != nil {
			return fmt.Errorf("make the holding directory: %w", err)
		}
		m.hold = name
		break
	}
	hold, err := openBeneath(m.ws, m.hold)
	if err != nil {
		return err
	}
	defer unix.Close(hold)
	for i, c := range renamed {
		dir, base := path.Split(c.lower)
		pfd, err := openBeneath(m.ws, strings.TrimSuffix(dir, "/"))
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
			c.hasLower = false
			continue
		}
		if err != nil {
			return err
		}
		var st unix.Stat_t
		if err := unix.Fstatat(pfd, base, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
			unix.Close(pfd)
			c.hasLower = false
			continue
		}
		c.held = fmt.Sprint(i)
		err = unix.Renameat(pfd, base, hold, c.held)
		unix.Close(pfd)
		if err != nil {
			return fmt.Errorf("move %s aside: %w", c.lower, err)
		}
	}
	return nil
}

// applyChildren applies the entries of upper directory e, open as ufd, to
// the workspace's directory open as wfd, at rel; fresh says that the merge
// made that directory, so that it is empty.
func (m *merger) applyChildren(e *upperEntry, ufd, wfd int, rel string, fresh bool) error {
	for _, c := range e.children {
		if err := m.apply(c, ufd, wfd, path.Join(rel, c.name), fresh); err != nil {
			return fmt.Errorf("%s: %w", path.Join(rel, c.name), err)
		}
	}
	return nil
}

func (m *merger) apply(c *upperEntry, ufd, wfd int, rel string, fresh bool) error {
	var cur unix.Stat_t
	exists := !fresh && unix.Fstatat(wfd, c.name, &cur, unix.AT_SYMLINK_NOFOLLOW) == nil
	curDir := exists && cur.Mode&unix.S_IFMT == unix.S_IFDIR
	perm := c.st.Mode & 0o777
	switch c.st.Mode & unix.S_IFMT {
	case unix.S_IFCHR:
		if c.whiteout && exists {
			return removeAllAt(wfd, c.name)
		}
		return nil // a device: never made
	case unix.S_IFDIR:
		made := false
		switch {
		case c.held != "":
			if exists {
				if err := removeAllAt(wfd, c.name); err != nil {
					return err
				}
			}
			hold, err := openBeneath(m.ws, m.hold)
			if err != nil {
				return err
			}
			err = unix.Renameat(hold, c.held, wfd, c.name)
			unix.Close(hold)
			if err != nil {
				return err
			}
		case c.opaque || !c.hasLower || !curDir:
			if exists {
				if err := removeAllAt(wfd, c.name); err != nil {
					return err
				}
			}
			if err := unix.Mkdirat(wfd, c.name, 0o700); err != nil {
				return err
			}
			made = true
		}
		sub, err := openDirAt(wfd, c.name)
		if err != nil {
			return err
		}
		defer unix.Close(sub)
		usub, err := openDirAt(ufd, c.name)
		if err != nil {
			return err
		}
		defer unix.Close(usub)
		if err := m.applyChildren(c, usub, sub, rel, made); err != nil {
			return err
		}
		return errors.Join(unix.Fchown(sub, m.uid, m.uid), unix.Fchmod(sub, perm), setTimes(sub, "", &c.st))
	case unix.S_IFREG:
		if c.st.Nlink > 1 {
			if first, ok := m.links[c.st.Ino]; ok {
				return m.link(first, wfd, c.name, exists, curDir)
			}
		}
		err := m.put(wfd, c.name, exists, curDir, func(name string) error {
			fd, err := unix.Openat(wfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
			if err != nil {
				return err
			}
			err = m.fill(ufd, c, fd)
			if cerr := unix.Close(fd); err == nil {
				err = cerr
			}
			return err
		})
		if err == nil && c.st.Nlink > 1 {
			m.links[c.st.Ino] = rel
		}
		return err
	case unix.S_IFLNK:
		target, err := readlinkAt(ufd, c.name)
		if err != nil {
			return err
		}
		return m.put(wfd, c.name, exists, curDir, func(name string) error {
			if err := unix.Symlinkat(target, wfd, name); err != nil {
				return err
			}
			return errors.Join(unix.Fchownat(wfd, name, m.uid, m.uid, unix.AT_SYMLINK_NOFOLLOW), setTimes(wfd, name, &c.st))
		})
	case unix.S_IFIFO, unix.S_IFSOCK:
		return m.put(wfd, c.name, exists, curDir, func(name string) error {
			if err := unix.Mknodat(wfd, name, c.st.Mode&unix.S_IFMT|perm, 0); err != nil {
				return err
			}
			return errors.Join(unix.Fchownat(wfd, name, m.uid, m.uid, unix.AT_SYMLINK_NOFOLLOW),
				unix.Fchmodat(wfd, name, perm, 0), setTimes(wfd, name, &c.st))
		})
	}
	return nil
}

// put makes the entry name of wfd with mk: directly where nothing is in
// the way, else under a temporary name that is then renamed over the old
// entry (a directory there is removed first), so that other hard links of
// a file replaced keep their content.
func (m *merger) put(wfd int, name string, exists, curDir bool, mk func(name string) error) error {
	if !exists {
		err := mk(name)
		if err != nil && !errors.Is(err, unix.EEXIST) {
			_ = unix.Unlinkat(wfd, name, 0) // what mk made of it
		}
		return err
	}
	tmp := m.tempName()
	err := mk(tmp)
	if err == nil {
		err = m.replace(wfd, tmp, name, curDir)
	}
	if err != nil {
		_ = unix.Unlinkat(wfd, tmp, 0)
	}
	return err
}

// fill writes the upper file c of directory ufd into fd, a new empty file,
// holes kept, and gives it c's permission bits, times and the program's
// uid.
func (m *merger) fill(ufd int, c *upperEntry, fd int) error {
	if c.st.Size > 0 {
		in, err := unix.Openat(ufd, c.name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		src := os.NewFile(uintptr(in), c.name)
		dup, err := unix.Dup(fd)
		if err != nil {
			src.Close()
			return err
		}
		dst := os.NewFile(uintptr(dup), c.name)
		err = sparse.Copy(dst, src)
		src.Close()
		dst.Close()
		if err != nil {
			return err
		}
	}
	return errors.Join(unix.Fchown(fd, m.uid, m.uid), unix.Fchmod(fd, c.st.Mode&0o777), setTimes(fd, "", &c.st))
}

// replace renames tmp over name in wfd; a directory there is removed first.
func (m *merger) replace(wfd int, tmp, name string, curDir bool) error {
	if curDir {
		if err := removeAllAt(wfd, name); err != nil {
			return err
		}
	}
	return unix.Renameat(wfd, tmp, wfd, name)
}

// link makes name in wfd a hard link of the workspace's file at first.
func (m *merger) link(first string, wfd int, name string, exists, curDir bool) error {
	dir, base := path.Split(first)
	pfd, err := openBeneath(m.ws, strings.TrimSuffix(dir, "/"))
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	return m.put(wfd, name, exists, curDir, func(name string) error { return unix.Linkat(pfd, base, wfd, name, 0) })
}

// tempName is a name for an entry about to be renamed over another: unique
// in this merge, and made with O_EXCL or its kind's equivalent.
func (m *merger) tempName() string {
	m.temps++
	return m.tempPrefix + strconv.Itoa(m.temps)
}

// openBeneath opens directory rel ("" for dir itself) below dir without
// following links or crossing mounts.
func openBeneath(dir int, rel string) (int, error) {
	if rel == "" {
		rel = "."
	}
	return unix.Openat2(dir, rel, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV,
	})
}

// openDirAt opens the directory name of dir, not following a link.
func openDirAt(dir int, name string) (int, error) {
	return openBeneath(dir, name)
}

// readlinkAt reads the symbolic link name of dir.
func readlinkAt(dir int, name string) (string, error) {
	for size := 256; ; size *= 2 {
		buf := make([]byte, size)
		n, err := unix.Readlinkat(dir, name, buf)
		if err != nil {
			return "", err
		}
		if n < size {
			return string(buf[:n]), nil
		}
	}
}

// setTimes gives name of dir, or with name "" dir itself, the access and
// modification times of st, not following a link.
func setTimes(dir int, name string, st *unix.Stat_t) error {
	ts := [2]unix.Timespec{st.Atim, st.Mtim}
	if name != "" {
		return unix.UtimesNanoAt(dir, name, ts[:], unix.AT_SYMLINK_NOFOLLOW)
	}
	// futimens(3): utimensat with a null path.
	if _, _, e := unix.Syscall6(unix.SYS_UTIMENSAT, uintptr(dir), 0, uintptr(unsafe.Pointer(&ts[0])), 0, 0, 0); e != 0 {
		return e
	}
	return nil
}

// removeAllAt removes name of dir and, for a directory, everything in it,
// without following links.
func removeAllAt(dir int, name string) error {
	err := unix.Unlinkat(dir, name, 0)
	if err == nil || errors.Is(err, unix.ENOENT) {
		return nil
	}
	if !errors.Is(err, unix.EISDIR) && !errors.Is(err, unix.EPERM) {
		return err
	}
	sub, err := openBeneath(dir, name)
	if err != nil {
		return err
	}
	names, err := readNames(sub)
	if err == nil {
		for _, n := range names {
			if err = removeAllAt(sub, n); err != nil {
				break
			}
		}
	}
	unix.Close(sub)
	if err != nil {
		return err
	}
	return unix.Unlinkat(dir, name, unix.AT_REMOVEDIR)
}
