package kubernetes

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"syscall"

	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/sandbox/internal/backendkit"
	"github.com/codeagent/codeagent/sandbox/internal/diskwatch"
	"github.com/codeagent/codeagent/sandbox/internal/wsperm"
)

// maxEntries bounds the entries the agent may report.
const maxEntries = 100_000

// copyBack applies the agent's account of the Pod's workspace to ws, the
// Docker backend's rules: new and changed entries are written, those the
// Pod no longer has (of the ones staged) removed; owners and modes as
// package wsperm says (ws itself untouched; an existing file rewritten in
// place, keeping its owner, group, ACL and extended attributes, its mode
// changed only where the program changed it, within wsperm's mask; new
// entries given to ws's owner when codeagent is root), never setuid,
// setgid or sticky bits from the program; symbolic links made as links
// and never followed (every access goes through os.Root, and an entry in
// the way is removed first); nothing read, written or removed on another
// file system mounted below ws; holes kept; and at most limit bytes of
// growth (allocated blocks and an inode per new entry, as the disk watcher
// charges them): entries beyond are left out and counted. Every frame
// comes from the Pod and is treated as hostile.
type copyBack struct {
	root   *os.Root
	rule   wsperm.Root
	dev    uint64 // ws's file system
	chown  bool   // codeagent is root: new entries are given to ws's owner
	staged map[string]bool
	seen   map[string]bool
	dirs   []dirMode
	// parents are the final mode and group of the directories applied so
	// far, which decide those of their new entries; foreign are entries
	// left alone for another file system, and what the Pod has below them.
	parents *wsperm.Dirs
	foreign map[string]bool
	limit   int64
	used    int64
	// skipped counts entries left out for the disk limit.
	skipped int
	// file being written
	cur      *os.File
	curRel   string
	curSize  int64
	curSkip  bool
	curBytes int64
}

type dirMode struct {
	rel  string
	mode uint32
}

// newCopyBack returns the copy back into the workspace opened as root,
// of which staged were sent to the Pod.
func newCopyBack(root *os.Root, staged map[string]bool, limit int64) (*copyBack, error) {
	rule, st, err := wsperm.RootOf(root)
	if err != nil {
		return nil, fmt.Errorf("stat workspace: %w", err)
	}
	return &copyBack{root: root, rule: rule, dev: st.Dev, chown: os.Geteuid() == 0, staged: staged,
		seen: map[string]bool{}, parents: wsperm.NewDirs(rule),
		foreign: map[string]bool{}, limit: limit}, nil
}

// apply handles one frame of the account.
func (c *copyBack) apply(f frame) error {
	if f.t != frameChunk && f.t != frameFileEnd && c.cur != nil {
		return errors.New("file entry not finished")
	}
	if len(c.seen) > maxEntries {
		return fmt.Errorf("more than %d entries", maxEntries)
	}
	switch f.t {
	case frameUnchanged:
		rel := string(f.p)
		if !validRel(rel) {
			return fmt.Errorf("bad path %q", rel)
		}
		c.seen[rel] = true
		return nil
	case frameDir:
		if len(f.p) < 4 {
			return errors.New("short directory entry")
		}
		return c.dir(string(f.p[4:]), binary.BigEndian.Uint32(f.p)&0o777)
	case frameLink:
		if len(f.p) < 2 || len(f.p) < 2+int(binary.BigEndian.Uint16(f.p)) {
			return errors.New("short link entry")
		}
		n := int(binary.BigEndian.Uint16(f.p))
		return c.link(string(f.p[2:2+n]), string(f.p[2+n:]))
	case frameFile:
		if len(f.p) < 20 {
			return errors.New("short file entry")
		}
		size, blocks := int64(binary.BigEndian.Uint64(f.p[4:])), int64(binary.BigEndian.Uint64(f.p[12:]))
		return c.file(string(f.p[20:]), binary.BigEndian.Uint32(f.p)&0o777, size, min(max(blocks, 0)*512, (size+4095)&^4095))
	case frameChunk:
		if c.cur == nil && !c.curSkip || len(f.p) < 8 {
			return errors.New("chunk outside a file")
		}
		off := int64(binary.BigEndian.Uint64(f.p))
		data := f.p[8:]
		if off < 0 || off+int64(len(data)) > c.curSize {
			return fmt.Errorf("chunk past the end of %s", c.curRel)
		}
		// Each chunk is charged its blocks: what the host file system
		// allocates for it.
		c.curBytes += (int64(len(data)) + 4095) &^ 4095
		if c.curSkip {
			return nil
		}
		if c.used+c.curBytes > c.limit {
			return c.abandon()
		}
		_, err := c.cur.WriteAt(data, off)
		return err
	case frameFileEnd:
		if c.cur == nil {
			c.curSkip = false
			return nil
		}
		c.used += c.curBytes
		err := c.cur.Truncate(c.curSize)
		if cerr := c.cur.Close(); err == nil {
			err = cerr
		}
		c.cur = nil
		return err
	}
	return fmt.Errorf("unexpected frame %q", f.t)
}

func (c *copyBack) charge(rel string, n int64) bool {
	if _, err := c.root.Lstat(rel); err != nil {
		n += diskwatch.InodeCost + int64(len(path.Base(rel))) + 12
	}
	if c.used+n > c.limit {
		c.skipped++
		return false
	}
	c.used += n
	return true
}

// leaveAlone reports whether rel is on, or below, another file system
// than ws's (remembered for what the Pod has below it).
func (c *copyBack) leaveAlone(rel string) bool {
	if c.foreign[path.Dir(rel)] || wsperm.Foreign(c.root, rel, c.dev) {
		c.foreign[rel] = true
		return true
	}
	return false
}

// clear removes rel when it is there as another kind than dir says (or as
// a link), and returns the entry kept, or nil. ok is false when a file
// system mounted below rel stopped its removal.
func (c *copyBack) clear(rel string, dir bool) (cur fs.FileInfo, ok bool, err error) {
	fi, err := c.root.Lstat(rel)
	if err != nil {
		return nil, true, nil
	}
	if dir && fi.IsDir() || !dir && fi.Mode().IsRegular() {
		return fi, true, nil
	}
	gone, err := wsperm.RemoveAll(c.root, rel, c.dev)
	return nil, gone, err
}

func (c *copyBack) dir(rel string, p uint32) error {
	if !validRel(rel) {
		return fmt.Errorf("bad path %q", rel)
	}
	c.seen[rel] = true
	if c.leaveAlone(rel) {
		return nil
	}
	cur, ok, err := c.clear(rel, true)
	if err != nil || !ok {
		c.foreign[rel] = !ok
		return err
	}
	parent := c.parents.Parent(c.root, rel)
	if cur == nil {
		if !c.charge(rel, 4096) {
			return nil
		}
		if err := c.root.Mkdir(rel, 0o700); err != nil {
			return err
		}
		uid, gid := c.rule.NewOwner(parent.Mode, parent.GID)
		if c.chown {
			if err := c.root.Lchown(rel, uid, gid); err != nil {
				return err
			}
		}
		mode := c.rule.NewMode(p, true, parent.Mode)
		c.parents.Note(rel, mode, gid)
		c.dirs = append(c.dirs, dirMode{rel, mode})
		return nil
	}
	old, _ := wsperm.StatOf(cur)
	mode := c.rule.ChangedMode(old.Mode, p, true, false)
	c.parents.Note(rel, mode, old.GID)
	switch {
	case !c.chown && old.Mode&0o700 != 0o700:
		// Not root: codeagent needs to write its entries.
		if err := c.root.Chmod(rel, wsperm.FileMode(old.Mode|0o700)); err != nil {
			return err
		}
		c.dirs = append(c.dirs, dirMode{rel, mode})
	case mode != old.Mode:
		c.dirs = append(c.dirs, dirMode{rel, mode})
	}
	return nil
}

func (c *copyBack) link(rel, target string) error {
	if !validRel(rel) {
		return fmt.Errorf("bad path %q", rel)
	}
	c.seen[rel] = true
	if c.leaveAlone(rel) {
		return nil
	}
	if _, err := c.root.Lstat(rel); err == nil {
		if gone, err := wsperm.RemoveAll(c.root, rel, c.dev); err != nil || !gone {
			return err
		}
	}
	n := int64(0)
	if len(target) > 60 {
		n = 4096
	}
	if !c.charge(rel, n) {
		return nil
	}
	if err := c.root.Symlink(target, rel); err != nil {
		return err
	}
	if c.chown {
		parent := c.parents.Parent(c.root, rel)
		uid, gid := c.rule.NewOwner(parent.Mode, parent.GID)
		return c.root.Lchown(rel, uid, gid)
	}
	return nil
}

// file starts the entry rel of size bytes, to which the program gave
// permission bits p, and which says it takes alloc bytes of disk: admitted
// by that, and written only while its chunks keep to it. An existing file
// is rewritten in place.
func (c *copyBack) file(rel string, p uint32, size, alloc int64) error {
	if !validRel(rel) || size < 0 {
		return fmt.Errorf("bad file entry %q", rel)
	}
	c.seen[rel] = true
	c.curRel, c.curSize, c.curBytes, c.curSkip = rel, size, 0, false
	if c.leaveAlone(rel) {
		c.curSkip = true
		return nil
	}
	cur, ok, err := c.clear(rel, false)
	if err != nil || !ok {
		c.curSkip = true
		return err
	}
	parent := c.parents.Parent(c.root, rel)
	flag, mode := os.O_WRONLY|os.O_CREATE|os.O_EXCL, c.rule.NewMode(p, false, parent.Mode)
	var old wsperm.Stat
	var oldAlloc int64
	opened := false
	if cur != nil {
		old, _ = wsperm.StatOf(cur)
		oldAlloc = allocated(cur)
		flag, mode = os.O_WRONLY|os.O_TRUNC, c.rule.ChangedMode(old.Mode, p, false, true)
	}
	if !c.charge(rel, alloc-oldAlloc) {
		c.curSkip = true
		return nil
	}
	c.used -= alloc // charged again by its chunks
	if cur != nil && !c.chown && old.Mode&0o200 == 0 {
		// Not root: codeagent needs to write it.
		if err := c.root.Chmod(rel, wsperm.FileMode(old.Mode|0o200)); err != nil {
			return err
		}
		opened = true
	}
	f, err := c.root.OpenFile(rel, flag, 0o600)
	if err != nil {
		return err
	}
	c.cur = f
	if cur == nil && c.chown {
		uid, gid := c.rule.NewOwner(parent.Mode, parent.GID)
		if err := f.Chown(uid, gid); err != nil {
			return err
		}
	}
	if cur == nil || opened || mode != old.Mode {
		return f.Chmod(wsperm.FileMode(mode))
	}
	return nil
}

// abandon stops writing the current file, which would pass the limit: it
// is removed and counted.
func (c *copyBack) abandon() error {
	_ = c.cur.Close()
	c.cur, c.curSkip = nil, true
	c.skipped++
	return c.root.Remove(c.curRel)
}

// finish removes staged entries the Pod no longer has and gives
// directories their bits, deepest first.
func (c *copyBack) finish() error {
	if c.cur != nil {
		_ = c.cur.Close()
		c.cur = nil
	}
	var gone []string
	for rel := range c.staged {
		if !c.seen[rel] {
			gone = append(gone, rel)
		}
	}
	sort.Strings(gone)
	var last string
	for _, rel := range gone {
		if last != "" && strings.HasPrefix(rel, last+"/") {
			continue
		}
		if _, err := wsperm.RemoveAll(c.root, rel, c.dev); err != nil {
			return fmt.Errorf("remove %s: %w", rel, err)
		}
		last = rel
	}
	for i := len(c.dirs) - 1; i >= 0; i-- {
		if err := c.root.Chmod(c.dirs[i].rel, wsperm.FileMode(c.dirs[i].mode)); err != nil {
			return err
		}
	}
	return nil
}

// allocated is what an entry takes on disk.
func allocated(fi fs.FileInfo) int64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Blocks * 512
	}
	return (fi.Size() + 4095) &^ 4095
}

// note tells in res that entries were left behind for the disk limit.
func (c *copyBack) note(res *sandbox.Result, lim sandbox.Limits) {
	backendkit.NoteLeftBehind(res, lim, c.skipped)
}
