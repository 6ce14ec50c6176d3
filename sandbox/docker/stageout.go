package docker

import (
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strings"

	"github.com/codeagent/codeagent/internal/sparse"
	"github.com/codeagent/codeagent/sandbox/internal/wsperm"
)

// stageOut brings ws up to date with the staging directory src after the
// program ended: new and changed entries are copied, entries that the
// program removed are removed. Both trees are accessed through os.Root, so
// that no symbolic link the program made is followed out of either, and
// nothing is read or written on another file system mounted below ws.
// Owners and modes follow package wsperm: ws itself is left as it is; an
// existing entry is rewritten in place (keeping its owner, group, ACL and
// extended attributes) and its mode changes only where the program
// changed it, within wsperm's mask; a new entry is given to ws's owner
// (when codeagent is root) with wsperm's mode. Only permission bits come
// from the program: never owners, setuid, setgid or sticky bits, extended
// attributes or file capabilities. modes, when not nil, are the bits the
// program gave its entries before handBack opened them up for codeagent.
func stageOut(src, ws string, snap snapshot, modes map[string]fs.FileMode) error {
	sr, err := os.OpenRoot(src)
	if err != nil {
		return fmt.Errorf("open staging directory: %w", err)
	}
	defer sr.Close()
	wr, err := os.OpenRoot(ws)
	if err != nil {
		return fmt.Errorf("open workspace: %w", err)
	}
	defer wr.Close()
	rule, root, err := wsperm.RootOf(wr)
	if err != nil {
		return fmt.Errorf("stat workspace: %w", err)
	}
	c := &copyOut{sr: sr, wr: wr, rule: rule, dev: root.Dev, chown: os.Geteuid() == 0,
		parents: wsperm.NewDirs(rule)}
	seen := map[string]bool{}
	err = fs.WalkDir(sr.FS(), ".", func(rel string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if rel == "." {
			return nil
		}
		if len(seen) >= maxEntries {
			return fmt.Errorf("more than %d entries", maxEntries)
		}
		seen[rel] = true
		fi, err := sr.Lstat(rel)
		if err != nil {
			return err
		}
		old, had := snap.entries[rel]
		if had && old == stampOf(fi) && old.ctime >= 0 && !fi.IsDir() {
			return nil
		}
		skip := func() error {
			if fi.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		cur, err := wr.Lstat(rel)
		if err != nil {
			cur = nil
		} else if st, ok := wsperm.StatOf(cur); ok && st.Dev != c.dev {
			return skip() // a mount below the workspace: not ours to change
		}
		if !snap.budget.admit(wr, rel, fi) {
			return skip()
		}
		done, err := c.sync(rel, fi, uint32(snap.perm(rel, fi, modes)), cur)
		if err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
		if !done {
			return skip()
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("copy workspace back: %w", err)
	}
	var gone []string
	for rel := range snap.entries {
		if !seen[rel] {
			gone = append(gone, rel)
		}
	}
	sort.Strings(gone)
	var last string
	for _, rel := range gone {
		if last != "" && strings.HasPrefix(rel, last+"/") {
			continue // inside a directory already removed
		}
		if _, err := wsperm.RemoveAll(wr, rel, c.dev); err != nil {
			return fmt.Errorf("remove %s from the workspace: %w", rel, err)
		}
		last = rel
	}
	// Directories get their bits last, deepest first, so that one without
	// write or search permission did not stop its entries being copied.
	for i := len(c.dirs) - 1; i >= 0; i-- {
		if err := wr.Chmod(c.dirs[i].rel, wsperm.FileMode(c.dirs[i].mode)); err != nil {
			return fmt.Errorf("copy workspace back: %w", err)
		}
	}
	return nil
}

// copyOut is the state of one stageOut.
type copyOut struct {
	sr, wr *os.Root
	rule   wsperm.Root
	dev    uint64 // the workspace's file system
	chown  bool   // codeagent is root: new entries are given to the workspace's owner
	dirs   []dirMode
	// parents are the final mode and group of the directories copied so
	// far, which decide those of their new entries.
	parents *wsperm.Dirs
}

// dirMode is a directory's final mode bits.
type dirMode struct {
	rel  string
	mode uint32
}

// perm is the permission bits the program left the staged entry rel with:
// its own, unless the staging was opened up for another uid; then the
// bits the program set (modes) or, for a staged file, the original ones.
func (s snapshot) perm(rel string, fi fs.FileInfo, modes map[string]fs.FileMode) fs.FileMode {
	if m, ok := modes[rel]; ok {
		return m.Perm()
	}
	if s.perms != nil {
		if m, ok := s.perms[stampOf(fi).ino]; ok {
			return m
		}
		return fi.Mode().Perm() &^ 0o022
	}
	return fi.Mode().Perm()
}

// sync makes ws's entry rel like the staged one described by fi, to which
// the program gave permission bits p; cur is ws's entry, or nil. A
// directory is left open to codeagent and its mode is set at the end. It
// reports false when the entry was left alone: another file system is
// mounted in its way.
func (c *copyOut) sync(rel string, fi fs.FileInfo, p uint32, cur fs.FileInfo) (bool, error) {
	if cur != nil && (cur.Mode().Type() != fi.Mode().Type() || fi.Mode()&fs.ModeSymlink != 0) {
		gone, err := wsperm.RemoveAll(c.wr, rel, c.dev)
		if err != nil || !gone {
			return false, err
		}
		cur = nil
	}
	var old wsperm.Stat
	if cur != nil {
		old, _ = wsperm.StatOf(cur)
	}
	parent := c.parents.Parent(c.wr, rel)
	uid, gid := c.rule.NewOwner(parent.Mode, parent.GID)
	switch {
	case fi.IsDir() && cur == nil:
		if err := c.wr.Mkdir(rel, 0o700); err != nil {
			return false, err
		}
		if err := c.own(rel, uid, gid); err != nil {
			return false, err
		}
		mode := c.rule.NewMode(p, true, parent.Mode)
		c.parents.Note(rel, mode, gid)
		c.dirs = append(c.dirs, dirMode{rel, mode})
	case fi.IsDir():
		mode := c.rule.ChangedMode(old.Mode, p, true, false)
		c.parents.Note(rel, mode, old.GID)
		switch {
		case !c.chown && old.Mode&0o700 != 0o700:
			// Not root: codeagent needs to write its entries.
			if err := c.wr.Chmod(rel, wsperm.FileMode(old.Mode|0o700)); err != nil {
				return false, err
			}
			c.dirs = append(c.dirs, dirMode{rel, mode})
		case mode != old.Mode:
			c.dirs = append(c.dirs, dirMode{rel, mode})
		}
	case fi.Mode().IsRegular():
		return true, c.file(rel, p, cur != nil, old, parent, uid, gid)
	case fi.Mode()&fs.ModeSymlink != 0:
		link, err := c.sr.Readlink(rel)
		if err != nil {
			return false, err
		}
		if err := c.wr.Symlink(link, rel); err != nil {
			return false, err
		}
		if c.chown {
			return true, c.wr.Lchown(rel, uid, gid)
		}
	}
	return true, nil // devices, fifos, sockets stay behind
}

// file copies the staged regular file rel: over the existing one in place
// (same inode: owner, group, ACL and extended attributes kept) when exists,
// else to a new file given to uid:gid.
func (c *copyOut) file(rel string, p uint32, exists bool, old wsperm.Stat, parent wsperm.Dir, uid, gid int) error {
	in, err := c.sr.Open(rel)
	if err != nil {
		return err
	}
	defer in.Close()
	flag, mode := os.O_WRONLY|os.O_CREATE|os.O_EXCL, c.rule.NewMode(p, false, parent.Mode)
	opened := false
	if exists {
		flag, mode = os.O_WRONLY|os.O_TRUNC, c.rule.ChangedMode(old.Mode, p, false, true)
		if !c.chown && old.Mode&0o200 == 0 {
			// Not root: codeagent needs to write it.
			if err := c.wr.Chmod(rel, wsperm.FileMode(old.Mode|0o200)); err != nil {
				return err
			}
			opened = true
		}
	}
	out, err := c.wr.OpenFile(rel, flag, 0o600)
	if err != nil {
		return err
	}
	if err := sparse.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if !exists && c.chown {
		if err := out.Chown(uid, gid); err != nil {
			out.Close()
			return err
		}
	}
	if !exists || opened || mode != old.Mode {
		if err := out.Chmod(wsperm.FileMode(mode)); err != nil {
			out.Close()
			return err
		}
	}
	return out.Close()
}

// own gives the new entry rel to uid:gid when codeagent is root.
func (c *copyOut) own(rel string, uid, gid int) error {
	if !c.chown {
		return nil
	}
	return c.wr.Lchown(rel, uid, gid)
}
