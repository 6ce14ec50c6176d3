package diskwatch

import (
	"errors"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/codeagent/codeagent/internal/nofollow"
)

// watchMask is what each directory's inotify watch reports: every change of
// a name, of a size or allocation (writes, truncation, fallocate) and of
// attributes (extended attributes, link counts). Events on unlinked files
// are left out; they cannot be measured by name.
const watchMask = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO |
	unix.IN_MODIFY | unix.IN_ATTRIB | unix.IN_CLOSE_WRITE | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF |
	unix.IN_ONLYDIR | unix.IN_EXCL_UNLINK

// maxHot bounds the files kept as being written.
const maxHot = 4096

// maxPending bounds the names kept for directories that could not be
// opened by their path yet; past it the account is rebuilt from a scan.
const maxPending = 4096

// node is a directory of the tree.
type node struct {
	wd       int // its inotify watch, -1 when none
	parent   *node
	name     string
	ino      uint64
	children map[string]uint64 // name -> inode number
}

// inode is one file, directory, link or other entry, however many names it
// has: hard links are charged once.
type inode struct {
	cost  int64
	names int
	dir   *node // for directories
}

// tree is the incremental account of a directory tree, kept up to date
// from inotify events. It is used by one goroutine.
type tree struct {
	rootFd int
	dev    uint64
	ifd    int // inotify descriptor, -1 when scanning without watches
	root   *node
	dirs   map[int]*node // by watch descriptor
	inodes map[uint64]*inode
	cost   int64
	names  int
	// tooDeep is set when a directory lies deeper than MaxDepth; watchFailed
	// when a watch could not be added (the user's inotify watches ran out).
	tooDeep, watchFailed bool
	// hot are the files being written: created or modified, not yet closed
	// after writing. A write's event comes when the write is done, so each
	// read of events measures them all again, with the part of a write
	// still under way that other processes are making.
	hot  map[*node]map[string]bool
	nhot int
	// pending are names changed in directories that could not be reached
	// by their path when their events were read: an ancestor was renamed
	// and its event is still queued. They are measured again at the next
	// read, which brings that rename. needScan is set when there were too
	// many to keep.
	pending  map[*node]map[string]bool
	npending int
	needScan bool
	relinks  int // directories moved in the account, ever
}

// heat marks name in n as being written, or as done when on is false.
func (t *tree) heat(n *node, name string, on bool) {
	names := t.hot[n]
	switch {
	case on && !names[name] && t.nhot < maxHot:
		if names == nil {
			names = map[string]bool{}
			t.hot[n] = names
		}
		names[name] = true
		t.nhot++
	case !on && names[name]:
		delete(names, name)
		t.nhot--
		if len(names) == 0 {
			delete(t.hot, n)
		}
	}
}

// cost is what an entry is charged: its allocated blocks (which include
// fallocated space, directory blocks, symbolic link targets and extended
// attribute blocks) and the inode itself; a regular file at least its size
// rounded up to a block, because stores through a shared mapping can fill
// it to its size without an event.
func cost(st *unix.Stat_t) int64 {
	c := st.Blocks * 512
	if st.Mode&unix.S_IFMT == unix.S_IFREG {
		c = max(c, (st.Size+4095)&^4095)
	}
	return c + InodeCost
}

func newTree(rootFd, ifd int) (*tree, error) {
	var st unix.Stat_t
	if err := unix.Fstat(rootFd, &st); err != nil {
		return nil, err
	}
	t := &tree{rootFd: rootFd, dev: st.Dev, ifd: ifd, dirs: map[int]*node{}, inodes: map[uint64]*inode{},
		hot: map[*node]map[string]bool{}, pending: map[*node]map[string]bool{}}
	t.root = &node{wd: -1, ino: st.Ino, children: map[string]uint64{}}
	in := &inode{cost: cost(&st), names: 1, dir: t.root}
	t.inodes[st.Ino] = in
	t.cost, t.names = in.cost, 0 // the root itself is not a new name
	t.scan(t.root, rootFd, 0)
	return t, nil
}

// scan watches directory n, open as fd, and then accounts for its entries,
// recursively: whatever is created after the watch is added is reported by
// it, whatever was created before is in the listing.
func (t *tree) scan(n *node, fd, depth int) {
	if t.ifd >= 0 {
		wd, err := unix.InotifyAddWatch(t.ifd, "/proc/self/fd/"+strconv.Itoa(fd), watchMask)
		switch {
		case err == nil:
			if old := t.dirs[wd]; old != nil && old != n {
				old.wd = -1
			}
			n.wd = wd
			t.dirs[wd] = n
		case errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.ENOMEM):
			t.watchFailed = true
		}
	}
	for _, name := range readNames(fd) {
		t.reconcile(n, name, fd, depth)
	}
}

// reconcile brings the account of name in directory n (open as fd) in line
// with what is there now.
func (t *tree) reconcile(n *node, name string, fd, depth int) {
	var st unix.Stat_t
	err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	ino, had := n.children[name]
	if err != nil || st.Dev != t.dev {
		if had {
			t.unlink(n, name)
		}
		return
	}
	if had && ino == st.Ino {
		t.recharge(ino, &st)
		t.rescan(ino, fd, name, depth)
		return
	}
	if had {
		t.unlink(n, name)
	}
	t.link(n, name, fd, &st, depth)
}

func (t *tree) recharge(ino uint64, st *unix.Stat_t) {
	if in := t.inodes[ino]; in != nil {
		c := cost(st)
		t.cost += c - in.cost
		in.cost = c
	}
}

func (t *tree) link(n *node, name string, fd int, st *unix.Stat_t, depth int) {
	if in := t.inodes[st.Ino]; in != nil && ((in.dir != nil) != (st.Mode&unix.S_IFMT == unix.S_IFDIR) ||
		in.dir != nil && t.within(n, in.dir)) {
		// The account is behind in a way only a scan can mend: the inode
		// number of an entry whose removal is still queued was reused for
		// another kind of entry, or the directory is above its new parent
		// (the events of several renames were read out of order).
		t.needScan = true
		return
	}
	n.children[name] = st.Ino
	t.names++
	if in := t.inodes[st.Ino]; in != nil {
		if in.dir == nil {
			in.names++ // another hard link
			t.recharge(st.Ino, st)
			return
		}
		// A directory seen under a new name: it moved and its old name's
		// event is still to come, or was lost. Only the new name counts.
		if old := in.dir; old.parent != nil && old.parent.children[old.name] == st.Ino && (old.parent != n || old.name != name) {
			delete(old.parent.children, old.name)
			t.names--
		}
		in.dir.parent, in.dir.name = n, name
		t.relinks++
		t.recharge(st.Ino, st)
		t.rescan(st.Ino, fd, name, depth)
		return
	}
	in := &inode{cost: cost(st), names: 1}
	t.inodes[st.Ino] = in
	t.cost += in.cost
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return
	}
	child := &node{wd: -1, parent: n, name: name, ino: st.Ino, children: map[string]uint64{}}
	in.dir = child
	if depth+1 > MaxDepth {
		t.tooDeep = true
		return
	}
	cfd, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return // gone or replaced already; its parent's events follow
	}
	t.scan(child, cfd, depth+1)
	unix.Close(cfd)
}

// rescan watches and lists directory ino, name in the directory open as fd,
// if it has never been: link found it but it moved away before it could be
// opened, and it is now seen again under name. Without this its contents
// would stay out of the account for good.
func (t *tree) rescan(ino uint64, fd int, name string, depth int) {
	in := t.inodes[ino]
	if in == nil || in.dir == nil || in.dir.wd >= 0 || t.ifd < 0 || t.watchFailed || depth+1 > MaxDepth {
		return
	}
	cfd, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	var st unix.Stat_t
	if unix.Fstat(cfd, &st) == nil && st.Ino == ino {
		t.scan(in.dir, cfd, depth+1)
	}
	unix.Close(cfd)
}

// unlink removes name from n's account, and the entry with its last name.
func (t *tree) unlink(n *node, name string) {
	ino, ok := n.children[name]
	if !ok {
		return
	}
	delete(n.children, name)
	t.names--
	in := t.inodes[ino]
	if in == nil {
		return
	}
	if in.dir != nil && (in.dir.parent != n || in.dir.name != name) {
		return // the directory lives on under another name
	}
	if in.names--; in.names > 0 {
		return
	}
	t.cost -= in.cost
	delete(t.inodes, ino)
	if d := in.dir; d != nil {
		for child := range d.children {
			t.unlink(d, child)
		}
		if d.wd >= 0 {
			_, _ = unix.InotifyRmWatch(t.ifd, uint32(d.wd))
			delete(t.dirs, d.wd)
			d.wd = -1
		}
	}
}

// maxChain bounds any walk up the account's parents: a directory may be
// moved deeper than MaxDepth, but not without bound, and a cycle (which the
// account never makes on purpose) must not run the walk forever.
const maxChain = 4 * MaxDepth

// within reports whether directory p is d or lies below it in the account
// (or the chain is too long to tell, which counts as below).
func (t *tree) within(p, d *node) bool {
	for i := 0; p != nil; p, i = p.parent, i+1 {
		if p == d || i > maxChain {
			return true
		}
	}
	return false
}

// open opens directory n by its path from the root without following any
// symbolic link, so that a program swapping a directory for a link cannot
// make it look elsewhere. It also returns n's depth.
func (t *tree) open(n *node) (int, int, error) {
	var parts []string
	for d := n; d.parent != nil; d = d.parent {
		if len(parts) > maxChain {
			t.needScan = true // a cycle, or deeper than the watcher goes
			return -1, 0, unix.ELOOP
		}
		parts = append(parts, d.name)
	}
	depth := len(parts)
	if depth == 0 {
		fd, err := unix.Dup(t.rootFd)
		return fd, 0, err
	}
	for i, j := 0, len(parts)-1; i < j; i, j = i+1, j-1 {
		parts[i], parts[j] = parts[j], parts[i]
	}
	fd, err := nofollow.Open(t.rootFd, strings.Join(parts, "/"), nofollow.How{Flags: unix.O_RDONLY | unix.O_DIRECTORY, SameMount: true})
	if err != nil {
		return -1, 0, err
	}
	return fd, depth, nil
}

// update accounts for the events of one read: names changed in each
// directory. Directory renames seen whole (both halves in this read) move
// the directory's account without a rescan.
func (t *tree) update(changed map[*node]map[string]bool, moves []move) {
	for _, m := range moves {
		ino, ok := m.from.children[m.fromName]
		in := t.inodes[ino]
		if !ok || in == nil || in.dir == nil {
			continue
		}
		if t.within(m.to, in.dir) {
			t.needScan = true // as in link: never a cycle in the account
			continue
		}
		if cur, ok := m.to.children[m.toName]; ok && cur != ino {
			t.unlink(m.to, m.toName) // an empty directory replaced by the rename
		}
		delete(m.from.children, m.fromName)
		m.to.children[m.toName] = ino
		in.dir.parent, in.dir.name = m.to, m.toName
		t.relinks++
	}
	for n, names := range t.hot {
		if n.wd < 0 && n != t.root {
			t.nhot -= len(names)
			delete(t.hot, n)
			continue
		}
		if changed[n] == nil {
			changed[n] = map[string]bool{}
		}
		for name := range names {
			changed[n][name] = true
		}
	}
	for n, names := range t.takePending() {
		if changed[n] == nil {
			changed[n] = names
			continue
		}
		for name := range names {
			changed[n][name] = true
		}
	}
	// A directory that could not be reached may become reachable in this
	// same read, when another directory of it is relinked after it: then
	// its names are measured again now, for there may be no next read.
	for pass := 0; ; pass++ {
		relinks := t.relinks
		t.measure(changed)
		if t.relinks == relinks || len(t.pending) == 0 || pass == 3 {
			return
		}
		changed = t.takePending()
	}
}

// takePending returns the names kept for later and keeps none.
func (t *tree) takePending() map[*node]map[string]bool {
	if len(t.pending) == 0 {
		return nil
	}
	p := t.pending
	t.pending, t.npending = map[*node]map[string]bool{}, 0
	return p
}

// measure reconciles the changed names of each directory with what is
// there now.
func (t *tree) measure(changed map[*node]map[string]bool) {
	for n, names := range changed {
		if n.wd < 0 && n != t.root {
			continue // dropped while this read was handled
		}
		fd, depth, err := t.open(n)
		var st unix.Stat_t
		if err == nil && (unix.Fstat(fd, &st) != nil || st.Ino != n.ino) {
			unix.Close(fd)
			err = unix.ESTALE
		}
		if err != nil {
			// Moved, replaced or removed, and the event that says so is
			// still queued: measure these names again after it.
			t.retryLater(n, names)
			continue
		}
		t.recharge(n.ino, &st) // the directory's own blocks
		for name := range names {
			t.reconcile(n, name, fd, depth)
		}
		unix.Close(fd)
	}
}

// retryLater keeps names of n for the next read, or asks for a full scan when
// too many are kept.
func (t *tree) retryLater(n *node, names map[string]bool) {
	if t.npending+len(names) > maxPending {
		t.needScan = true
		return
	}
	if t.pending[n] == nil {
		t.pending[n] = map[string]bool{}
	}
	for name := range names {
		if !t.pending[n][name] {
			t.pending[n][name] = true
			t.npending++
		}
	}
}

type move struct {
	from, to         *node
	fromName, toName string
}

// readNames lists directory fd, without "." and "..".
func readNames(fd int) []string {
	if _, err := unix.Seek(fd, 0, 0); err != nil {
		return nil
	}
	var names []string
	buf := make([]byte, 32<<10)
	for {
		n, err := unix.ReadDirent(fd, buf)
		if err != nil || n <= 0 {
			return names
		}
		_, _, names = syscall.ParseDirent(buf[:n], -1, names)
	}
}
