//go:build linux && (amd64 || arm64)

package namespace

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/codeagent/codeagent/sandbox/internal/wsperm"
)

// mergeUpper brings the workspace up to date with the upper layer of the
// overlay its program ran on, once every process of the sandbox is gone:
// afterwards the workspace holds what the program saw at /workspace, with
// owners and modes by package wsperm's rule.
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
// remove, directories are kept (an opaque one emptied), made or moved into
// place from the holding directory, and files, symbolic links and FIFOs
// are written anew (under a temporary name, then renamed over the old
// entry, so that other hard links of a file the program changed keep the
// old content, as they did in the overlay). Hard links between the
// program's files are kept. An existing entry keeps its owner, group and
// extended attributes (a rewritten file gets its predecessor's, less file
// capabilities); new entries belong to the workspace's owner; modes follow
// wsperm; the workspace directory itself is left as it is. No device,
// socket, setuid, setgid or sticky bit reaches the workspace. It works in
// the workspace as inWorkspace says: by descriptors, confined to it, under
// its lock.
//
// A run that wrote nothing costs one read of the upper directory.
func mergeUpper(upper, ws *os.File) error {
	root, err := readUpper(int(upper.Fd()))
	if err != nil {
		return fmt.Errorf("read the upper layer: %w", err)
	}
	if len(root.children) == 0 {
		return nil
	}
	if err := root.resolveLower("", true); err != nil {
		return err
	}
	return inWorkspace(context.Background(), int(ws.Fd()), func(wfd int) error {
		var wst unix.Stat_t
		if err := unix.Fstat(wfd, &wst); err != nil {
			return err
		}
		m := &merger{ws: wfd, root: wsperm.NewRoot(wst.Uid, wst.Gid, wst.Mode), links: map[uint64]string{},
			replacer: newReplacer("tmp")}
		if err := m.holdOrigins(root); err != nil {
			return err
		}
		if err := m.applyChildren(root, int(upper.Fd()), m.ws, "", false, &wst); err != nil {
			return err
		}
		if m.hold != "" {
			return removeAllAt(m.ws, m.hold)
		}
		return nil
	})
}

// merger applies an upper layer to the workspace open as ws.
type merger struct {
	ws    int
	root  wsperm.Root       // the workspace directory: owners and modes of new entries
	hold  string            // the holding directory's name in ws, once made
	links map[uint64]string // upper inode of a file with hard links: its first path in ws
	*replacer
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
// the workspace's directory open as wfd (described by dst), at rel; fresh
// says that the merge made that directory, so that it is empty.
func (m *merger) applyChildren(e *upperEntry, ufd, wfd int, rel string, fresh bool, dst *unix.Stat_t) error {
	for _, c := range e.children {
		if err := m.apply(c, ufd, wfd, path.Join(rel, c.name), fresh, dst); err != nil {
			return fmt.Errorf("%s: %w", path.Join(rel, c.name), err)
		}
	}
	return nil
}

// apply applies upper entry c of directory ufd to the workspace's
// directory wfd, described by parent.
func (m *merger) apply(c *upperEntry, ufd, wfd int, rel string, fresh bool, parent *unix.Stat_t) error {
	var cur unix.Stat_t
	exists := !fresh && unix.Fstatat(wfd, c.name, &cur, unix.AT_SYMLINK_NOFOLLOW) == nil
	kind := cur.Mode & unix.S_IFMT
	curDir := exists && kind == unix.S_IFDIR
	switch c.st.Mode & unix.S_IFMT {
	case unix.S_IFCHR:
		if c.whiteout && exists {
			return removeAllAt(wfd, c.name)
		}
		return nil // a device: never made
	case unix.S_IFDIR:
		return m.applyDir(c, ufd, wfd, rel, exists, curDir, &cur, parent)
	case unix.S_IFREG:
		if c.st.Nlink > 1 {
			if first, ok := m.links[c.st.Ino]; ok {
				return m.link(first, wfd, c.name, exists, curDir)
			}
		}
		old := &cur
		if !exists || kind != unix.S_IFREG {
			old = nil
		}
		err := m.put(wfd, c.name, exists, curDir, func(name string) error {
			return m.writeFile(ufd, c, wfd, name, old, parent)
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
		uid, gid := m.root.NewOwner(parent.Mode, int(parent.Gid))
		if exists && kind == unix.S_IFLNK {
			uid, gid = int(cur.Uid), int(cur.Gid)
		}
		return m.put(wfd, c.name, exists, curDir, func(name string) error {
			if err := unix.Symlinkat(target, wfd, name); err != nil {
				return err
			}
			return errors.Join(unix.Fchownat(wfd, name, uid, gid, unix.AT_SYMLINK_NOFOLLOW), setTimes(wfd, name, &c.st))
		})
	case unix.S_IFIFO:
		uid, gid := m.root.NewOwner(parent.Mode, int(parent.Gid))
		mode := m.root.NewMode(c.st.Mode, false, parent.Mode)
		return m.put(wfd, c.name, exists, curDir, func(name string) error {
			// Its mode is given at creation (the umask is 0): nothing
			// changes a mode by name.
			if err := unix.Mknodat(wfd, name, unix.S_IFIFO|mode, 0); err != nil {
				return err
			}
			return errors.Join(unix.Fchownat(wfd, name, uid, gid, unix.AT_SYMLINK_NOFOLLOW), setTimes(wfd, name, &c.st))
		})
	}
	return nil // sockets and devices stay behind
}

// applyDir applies upper directory c: a renamed one is moved into place,
// an opaque one replaces what the workspace has there (an existing
// directory is emptied, keeping its owner, mode and attributes), a new one
// is made; then its entries are applied, and its mode and times set.
func (m *merger) applyDir(c *upperEntry, ufd, wfd int, rel string, exists, curDir bool, cur, parent *unix.Stat_t) error {
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
	case curDir && c.opaque:
		if err := emptyDirAt(wfd, c.name); err != nil {
			return err
		}
	case !curDir:
		if exists {
			if err := removeAllAt(wfd, c.name); err != nil {
				return err
			}
		}
		if err := unix.Mkdirat(wfd, c.name, m.root.NewMode(c.st.Mode, true, parent.Mode)); err != nil {
			return err
		}
		made = true
	}
	sub, err := openDirAt(wfd, c.name)
	if err != nil {
		return err
	}
	defer unix.Close(sub)
	var st unix.Stat_t
	if err := unix.Fstat(sub, &st); err != nil {
		return err
	}
	var modeErr error
	if made {
		uid, gid := m.root.NewOwner(parent.Mode, int(parent.Gid))
		modeErr = unix.Fchown(sub, uid, gid)
	} else if mode := m.root.ChangedMode(st.Mode, c.st.Mode, true, false); mode != st.Mode&0o7777 {
		modeErr = unix.Fchmod(sub, mode)
	}
	if modeErr != nil {
		return modeErr
	}
	usub, err := openDirAt(ufd, c.name)
	if err != nil {
		return err
	}
	defer unix.Close(usub)
	if err := m.applyChildren(c, usub, sub, rel, made, &st); err != nil {
		return err
	}
	return setTimes(sub, "", &c.st)
}

// writeFile makes name of wfd a copy of upper file c of ufd, holes kept:
// with old (the entry it replaces, or nil) its owner, group, extended
// attributes and mode by wsperm.ChangedMode, else those of a new entry in
// parent.
func (m *merger) writeFile(ufd int, c *upperEntry, wfd int, name string, old, parent *unix.Stat_t) error {
	uid, gid := m.root.NewOwner(parent.Mode, int(parent.Gid))
	mode := m.root.NewMode(c.st.Mode, false, parent.Mode)
	if old != nil {
		// Written in any case: the content is the program's, whatever its
		// size and times say, so no setuid or setgid bit survives.
		uid, gid, mode = int(old.Uid), int(old.Gid), m.root.ChangedMode(old.Mode, c.st.Mode, false, true)
	}
	in, err := unix.Openat(ufd, c.name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	src := os.NewFile(uintptr(in), c.name)
	defer src.Close()
	return newCopy(src, wfd, name, uid, gid, mode, &c.st, c.name, old)
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

// emptyDirAt removes everything in directory name of dir, not following
// links, and keeps the directory.
func emptyDirAt(dir int, name string) error {
	sub, err := openBeneath(dir, name)
	if err != nil {
		return err
	}
	defer unix.Close(sub)
	names, err := readNames(sub)
	if err != nil {
		return err
	}
	for _, n := range names {
		if err := removeAllAt(sub, n); err != nil {
			return err
		}
	}
	return nil
}
