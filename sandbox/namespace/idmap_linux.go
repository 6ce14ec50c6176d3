//go:build linux && (amd64 || arm64)

package namespace

import (
	"container/list"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/codeagent/codeagent/sandbox/internal/osthread"
)

// Run as root, the backend shows the workspace to the program through an
// idmapped mount instead of giving the workspace's entries to the
// program's uid: on the mount, whatever belongs to the workspace
// directory's owner (and group) appears as the program's host uid (and
// gid), so the program can read and change it, while on disk nothing
// changes owner. Entries of other owners appear as the overflow id
// (nobody) and are reachable by their "other" bits only. An idmapped
// mount takes a user namespace that holds the mapping; these are made
// once per owner and program uid and kept (see idmaps).

// idmapKey is a mapping: on-disk uid and gid to one host id (and every
// other id to itself, see idmapLines).
type idmapKey struct{ uid, gid, host int }

// idmaps keeps user namespaces of mappings, the most recently used first.
// A namespace costs a process's start to make (~1 ms) and nothing to keep
// but its descriptor.
type idmaps struct {
	helper string // any executable: the process that makes a namespace never runs it

	mu    sync.Mutex
	byKey map[idmapKey]*list.Element
	lru   list.List // of *idmapNS
}

type idmapNS struct {
	key idmapKey
	fd  int
}

// maxIdmaps bounds the namespaces kept.
const maxIdmaps = 256

func newIdmaps(helper string) *idmaps {
	return &idmaps{helper: helper, byKey: map[idmapKey]*list.Element{}}
}

// get returns a descriptor of a user namespace that maps k, which the
// caller closes.
func (c *idmaps) get(k idmapKey) (int, error) {
	c.mu.Lock()
	if e, ok := c.byKey[k]; ok {
		c.lru.MoveToFront(e)
		fd, err := unix.FcntlInt(uintptr(e.Value.(*idmapNS).fd), unix.F_DUPFD_CLOEXEC, 0)
		c.mu.Unlock()
		return fd, err
	}
	c.mu.Unlock()
	fd, err := makeIDMapNS(c.helper, k)
	if err != nil {
		return -1, err
	}
	dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		unix.Close(fd)
		return -1, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byKey[k]; ok { // made meanwhile by another run
		c.lru.MoveToFront(e)
		unix.Close(fd)
		return dup, nil
	}
	c.byKey[k] = c.lru.PushFront(&idmapNS{key: k, fd: fd})
	for c.lru.Len() > maxIdmaps {
		old := c.lru.Remove(c.lru.Back()).(*idmapNS)
		delete(c.byKey, old.key)
		unix.Close(old.fd)
	}
	return dup, nil
}

// close releases every namespace kept.
func (c *idmaps) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for e := c.lru.Front(); e != nil; e = e.Next() {
		unix.Close(e.Value.(*idmapNS).fd)
	}
	c.lru.Init()
	c.byKey = map[idmapKey]*list.Element{}
}

// makeIDMapNS makes a user namespace whose only mapping is k: a child is
// cloned into a new user namespace, its maps written, and it is stopped
// at its exec by ptrace, so that nothing of the helper ever runs; the
// namespace outlives it through the returned descriptor. Ptrace ties the
// child to the thread that started it, so everything happens on one
// thread of its own.
func makeIDMapNS(helper string, k idmapKey) (int, error) {
	nsfd := -1
	err := osthread.Run(func() error {
		attr := &syscall.ProcAttr{Env: []string{}, Sys: &syscall.SysProcAttr{
			Cloneflags:  syscall.CLONE_NEWUSER,
			Ptrace:      true,
			Pdeathsig:   syscall.SIGKILL,
			UidMappings: idmapLines(k.uid, k.host),
			GidMappings: idmapLines(k.gid, k.host),
		}}
		pid, err := syscall.ForkExec(helper, []string{helper}, attr)
		if err != nil {
			return fmt.Errorf("make the workspace's id mapping: %w", err)
		}
		defer reap(pid)
		nsfd, err = unix.Open("/proc/"+strconv.Itoa(pid)+"/ns/user", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("make the workspace's id mapping: %w", err)
		}
		return nil
	})
	return nsfd, err
}

// maxID is the largest valid id plus one ((uid_t)-1 is not an id).
const maxID = 1<<32 - 1

// idmapLines maps owner to host and every other id to itself, but host
// (whose place owner takes): entries of other owners keep their ids on the
// mount (so that an ACL naming them is still valid when overlayfs copies
// it up), and the sandbox, whose own user namespace maps only its uid,
// sees them as nobody.
func idmapLines(owner, host int) []syscall.SysProcIDMap {
	lines := []syscall.SysProcIDMap{{ContainerID: owner, HostID: host, Size: 1}}
	skip := []int{min(owner, host), max(owner, host)}
	from := 0
	for _, s := range append(skip, maxID) {
		if s > from {
			lines = append(lines, syscall.SysProcIDMap{ContainerID: from, HostID: from, Size: s - from})
		}
		from = max(from, s+1)
	}
	return lines
}

// reap kills a stopped tracee and waits until it is gone.
func reap(pid int) {
	_ = unix.Kill(pid, unix.SIGKILL)
	for {
		var ws unix.WaitStatus
		_, err := unix.Wait4(pid, &ws, unix.WALL, nil)
		if err != nil && !errors.Is(err, unix.EINTR) {
			return
		}
		if err == nil && (ws.Exited() || ws.Signaled()) {
			return
		}
	}
}

// idmapWorkspace makes the detached mount tree show what belongs to the
// owner of the workspace directory st describes as host id host.
func (b *Backend) idmapWorkspace(tree int, st *unix.Stat_t, host int) error {
	ns, err := b.idmaps.get(idmapKey{uid: int(st.Uid), gid: int(st.Gid), host: host})
	if err != nil {
		return err
	}
	defer unix.Close(ns)
	a := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP, Userns_fd: uint64(ns)}
	if err := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH, &a); err != nil {
		return fmt.Errorf("idmap the workspace mount (its file system may not support idmapped mounts): %w", err)
	}
	return nil
}

// helperBinary is an executable for makeIDMapNS: bwrap, which the backend
// needs anyway, or this program.
func helperBinary(bwrap string) string {
	if bwrap != "" {
		return bwrap
	}
	exe, _ := os.Executable()
	return exe
}

// lastOwner is the owner of the latest run's workspace, for prepareIdmap.
type lastOwner struct {
	mu       sync.Mutex
	uid, gid int
	known    bool
}

// noteOwner remembers st's owner as the latest workspace's.
func (b *Backend) noteOwner(st *unix.Stat_t) {
	b.owner.mu.Lock()
	b.owner.uid, b.owner.gid, b.owner.known = int(st.Uid), int(st.Gid), true
	b.owner.mu.Unlock()
}

// prepareIdmap makes, in the background, the mapping that a run of a
// launcher of host uid uid will most likely need: the latest workspace's
// owner (root's, before any run) to uid, so that the run finds it made.
func (b *Backend) prepareIdmap(uid int) {
	b.owner.mu.Lock()
	k := idmapKey{uid: b.owner.uid, gid: b.owner.gid, host: uid}
	if !b.owner.known {
		k.uid, k.gid = os.Geteuid(), os.Getegid()
	}
	b.owner.mu.Unlock()
	b.background(func() {
		if fd, err := b.idmaps.get(k); err == nil {
			unix.Close(fd)
		}
	})
}
