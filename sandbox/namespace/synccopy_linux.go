//go:build linux && (amd64 || arm64)

package namespace

import (
	"errors"
	"os"
	"path"

	"golang.org/x/sys/unix"

	"github.com/codeagent/codeagent/sandbox/internal/wsperm"
)

// copier carries entries between a kernel's copy and its workspace for
// Sync, one at a time, by descriptors and never following a link: into the
// workspace by package wsperm's rules (an existing entry keeps its owner,
// group and extended attributes), into the copy with what the workspace's
// owner owns given to the sandbox's uid.
type copier struct {
	root       wsperm.Root // the workspace directory
	uid        int         // the sandbox's host uid
	w, k       int         // the workspace and the copy
	curW, curK map[string]stamp
	rep        *replacer // puts entries in place of others
}

// trees returns the source and destination of o and the source's stamps.
func (c *copier) trees(o op) (src, dst int, stamps map[string]stamp) {
	if o.fromK {
		return c.k, c.w, c.curK
	}
	return c.w, c.k, c.curW
}

// remove removes o's entry from its destination; a directory only when it
// is empty (what is left in it changed on the other side, and stays).
func (c *copier) remove(o op) error {
	_, dst, _ := c.trees(o)
	pd, name, err := parentOf(dst, o.rel, nil)
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
		return nil
	}
	if err != nil {
		return err
	}
	defer unix.Close(pd)
	var st unix.Stat_t
	if err := unix.Fstatat(pd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return nil
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		err = unix.Unlinkat(pd, name, unix.AT_REMOVEDIR)
		if errors.Is(err, unix.ENOTEMPTY) || errors.Is(err, unix.EEXIST) {
			return nil
		}
		return err
	}
	return unix.Unlinkat(pd, name, 0)
}

// owner is who a new entry of kind dir in destination directory pd
// (described by pst) belongs to, and its mode, given the source's mode.
func (c *copier) newEntry(toK bool, rel string, srcMode uint32, dir bool, pst *unix.Stat_t) (uid, gid int, mode uint32) {
	if toK {
		w := c.curW[rel]
		uid, gid = int(w.uid), int(w.gid)
		if uid == c.root.UID {
			uid = c.uid
		}
		if gid == c.root.GID {
			gid = c.uid
		}
		mode = srcMode & 0o777
		if dir {
			mode = srcMode & 0o3777
		}
		return uid, gid, mode
	}
	uid, gid = c.root.NewOwner(pst.Mode, int(pst.Gid))
	return uid, gid, c.root.NewMode(srcMode, dir, pst.Mode)
}

// mkParent makes directory name of dir, missing in the destination of o
// while an entry below it is carried: with the source's mode and owner
// where the source has it.
func (c *copier) mkParent(o op) func(dir int, rel, name string) error {
	return func(dir int, rel, name string) error {
		var pst unix.Stat_t
		if err := unix.Fstat(dir, &pst); err != nil {
			return err
		}
		_, _, stamps := c.trees(o)
		mode := uint32(unix.S_IFDIR | 0o755)
		if st, ok := stamps[rel]; ok && st.kind() == unix.S_IFDIR {
			mode = st.mode
		}
		uid, gid, m := c.newEntry(!o.fromK, rel, mode, true, &pst)
		return c.mkdir(dir, name, uid, gid, m)
	}
}

// mkdir makes directory name of dir, mode given at creation (the umask is
// 0), and gives it to uid:gid through a descriptor.
func (c *copier) mkdir(dir int, name string, uid, gid int, mode uint32) error {
	if err := unix.Mkdirat(dir, name, mode); err != nil {
		return err
	}
	fd, err := openBeneath(dir, name)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Fchown(fd, uid, gid)
}

// put makes o's destination entry like its source.
func (c *copier) put(o op) error {
	src, dst, stamps := c.trees(o)
	sst := stamps[o.rel]
	toK := !o.fromK
	pd, name, err := parentOf(dst, o.rel, c.mkParent(o))
	if err != nil {
		return err
	}
	defer unix.Close(pd)
	var pst, cur unix.Stat_t
	if err := unix.Fstat(pd, &pst); err != nil {
		return err
	}
	exists := unix.Fstatat(pd, name, &cur, unix.AT_SYMLINK_NOFOLLOW) == nil
	curKind := cur.Mode & unix.S_IFMT
	spd, sname, err := parentOf(src, o.rel, nil)
	if err != nil {
		return err
	}
	defer unix.Close(spd)
	var srcSt unix.Stat_t
	if err := unix.Fstatat(spd, sname, &srcSt, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	switch sst.kind() {
	case unix.S_IFDIR:
		if exists && curKind == unix.S_IFDIR {
			mode := sst.mode & 0o7777
			if !toK {
				mode = c.root.ChangedMode(cur.Mode, sst.mode, true, false)
			}
			if mode != cur.Mode&0o7777 {
				fd, err := openBeneath(pd, name)
				if err != nil {
					return err
				}
				err = unix.Fchmod(fd, mode)
				unix.Close(fd)
				return err
			}
			return nil
		}
		if exists {
			if err := removeAllAt(pd, name); err != nil {
				return err
			}
		}
		uid, gid, mode := c.newEntry(toK, o.rel, sst.mode, true, &pst)
		if err := c.mkdir(pd, name, uid, gid, mode); err != nil {
			return err
		}
		return setTimes(pd, name, &srcSt)
	case unix.S_IFREG:
		return c.rep.put(pd, name, exists, curKind == unix.S_IFDIR, func(tmp string) error {
			return c.file(spd, sname, &srcSt, pd, tmp, toK, o.rel, exists && curKind == unix.S_IFREG, &cur, &pst)
		})
	case unix.S_IFLNK:
		target, err := readlinkAt(spd, sname)
		if err != nil {
			return err
		}
		uid, gid, _ := c.newEntry(toK, o.rel, 0o777, false, &pst)
		return c.rep.put(pd, name, exists, curKind == unix.S_IFDIR, func(tmp string) error {
			if err := unix.Symlinkat(target, pd, tmp); err != nil {
				return err
			}
			return errors.Join(unix.Fchownat(pd, tmp, uid, gid, unix.AT_SYMLINK_NOFOLLOW), setTimes(pd, tmp, &srcSt))
		})
	case unix.S_IFIFO:
		uid, gid, mode := c.newEntry(toK, o.rel, sst.mode, false, &pst)
		return c.rep.put(pd, name, exists, curKind == unix.S_IFDIR, func(tmp string) error {
			if err := unix.Mknodat(pd, tmp, unix.S_IFIFO|mode, 0); err != nil {
				return err
			}
			return unix.Fchownat(pd, tmp, uid, gid, unix.AT_SYMLINK_NOFOLLOW)
		})
	}
	return nil // sockets and devices are not carried
}

// file writes a copy of regular file sname of spd (described by srcSt) as
// tmp in pd: with had, the owner, group, extended attributes and, by
// wsperm, mode of the entry cur it replaces in the workspace; else a new
// entry's, or the copy's mapping of the workspace's owners.
func (c *copier) file(spd int, sname string, srcSt *unix.Stat_t, pd int, tmp string, toK bool, rel string, had bool, cur, pst *unix.Stat_t) error {
	in, err := unix.Openat(spd, sname, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	src := os.NewFile(uintptr(in), sname)
	defer src.Close()
	var st unix.Stat_t
	if err := unix.Fstat(in, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Ino != srcSt.Ino {
		return errors.New("changed while it was copied")
	}
	uid, gid, mode := c.newEntry(toK, rel, st.Mode, false, pst)
	if !had || toK {
		return newCopy(src, pd, tmp, uid, gid, mode, &st, "", nil)
	}
	uid, gid, mode = int(cur.Uid), int(cur.Gid), c.root.ChangedMode(cur.Mode, st.Mode, false, true)
	return newCopy(src, pd, tmp, uid, gid, mode, &st, path.Base(rel), cur)
}
