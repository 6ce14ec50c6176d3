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
	"github.com/codeagent/codeagent/sandbox/internal/diskwatch"
)

// maxEntries bounds the entries the agent may report.
const maxEntries = 100_000

// copyBack applies the agent's account of the Pod's workspace to ws, the
// Docker backend's rules: new and changed entries are written, those the
// Pod no longer has (of the ones staged) removed; only permission bits
// (0777) of files and directories, never owners, setuid, setgid or sticky
// bits; symbolic links made as links and never followed (every access goes
// through os.Root, and an entry in the way is removed first); holes kept;
// and at most limit bytes of growth (allocated blocks and an inode per new
// entry, as the disk watcher charges them): entries beyond are left out and
// counted. Every frame comes from the Pod and is treated as hostile.
type copyBack struct {
	root   *os.Root
	staged map[string]bool
	seen   map[string]bool
	dirs   []dirMode
	limit  int64
	used   int64
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
	perm fs.FileMode
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
		return c.dir(string(f.p[4:]), fs.FileMode(binary.BigEndian.Uint32(f.p)&0o777))
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
		return c.file(string(f.p[20:]), fs.FileMode(binary.BigEndian.Uint32(f.p)&0o777), size, min(max(blocks, 0)*512, (size+4095)&^4095))
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

// clear removes rel when it is there as another kind, or as a link.
func (c *copyBack) clear(rel string, keepDir bool) (exists bool, err error) {
	fi, err := c.root.Lstat(rel)
	if err != nil {
		return false, nil
	}
	if keepDir && fi.IsDir() {
		return true, nil
	}
	if fi.Mode().IsRegular() && !keepDir {
		return true, nil
	}
	return false, c.root.RemoveAll(rel)
}

func (c *copyBack) dir(rel string, perm fs.FileMode) error {
	if !validRel(rel) {
		return fmt.Errorf("bad path %q", rel)
	}
	c.seen[rel] = true
	exists, err := c.clear(rel, true)
	if err != nil {
		return err
	}
	if !exists {
		if !c.charge(rel, 4096) {
			return nil
		}
		if err := c.root.Mkdir(rel, 0o700); err != nil {
			return err
		}
	} else if err := c.root.Chmod(rel, 0o700); err != nil {
		return err
	}
	c.dirs = append(c.dirs, dirMode{rel, perm})
	return nil
}

func (c *copyBack) link(rel, target string) error {
	if !validRel(rel) {
		return fmt.Errorf("bad path %q", rel)
	}
	c.seen[rel] = true
	if _, err := c.root.Lstat(rel); err == nil {
		if err := c.root.RemoveAll(rel); err != nil {
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
	return c.root.Symlink(target, rel)
}

// file starts the entry rel of size bytes, which says it takes alloc bytes
// of disk: admitted by that, and written only while its chunks keep to it.
func (c *copyBack) file(rel string, perm fs.FileMode, size, alloc int64) error {
	if !validRel(rel) || size < 0 {
		return fmt.Errorf("bad file entry %q", rel)
	}
	c.seen[rel] = true
	c.curRel, c.curSize, c.curBytes, c.curSkip = rel, size, 0, false
	exists, err := c.clear(rel, false)
	if err != nil {
		return err
	}
	var old int64
	if exists {
		if fi, err := c.root.Lstat(rel); err == nil {
			old = allocated(fi)
		}
		if err := c.root.Chmod(rel, 0o600); err != nil {
			return err
		}
	}
	if !c.charge(rel, alloc-old) {
		c.curSkip = true
		return nil
	}
	c.used -= alloc // charged again by its chunks
	f, err := c.root.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	c.cur = f
	if err := f.Chmod(perm); err != nil {
		return err
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
		// ENOTDIR: a parent is now a file (a directory replaced by a file),
		// so the entry is gone already.
		if err := c.root.RemoveAll(rel); err != nil && !errors.Is(err, syscall.ENOTDIR) {
			return fmt.Errorf("remove %s: %w", rel, err)
		}
		last = rel
	}
	for i := len(c.dirs) - 1; i >= 0; i-- {
		if err := c.root.Chmod(c.dirs[i].rel, c.dirs[i].perm); err != nil {
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
	sandbox.NoteLeftBehind(res, lim, c.skipped)
}
