//go:build linux && (amd64 || arm64)

package namespace

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/codeagent/codeagent/internal/lateclose"
	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/sandbox/internal/diskwatch"
	"github.com/codeagent/codeagent/sandbox/internal/stagingfs"
)

// Run as root, the backend bounds a program's writes to its workspace by
// construction: the program sees an overlay whose lower layer is the
// workspace (mounted read-only) and whose upper layer, where every write
// lands, is on a file system of its own of the disk limit's size (package
// stagingfs: ext4 in a sparse image on a loop device). Writes past it fail
// with ENOSPC, whatever the program creates; a file of the workspace that
// the program changes is copied up whole first, so changing an existing
// file costs its size. After the program has ended, mergeUpper brings the
// workspace up to date with the upper layer.
//
// Each launcher gets its upper file system as it starts (in the background
// for a warm pool), mounted in the launcher's private mount namespace,
// which the host never sees: the image is removed as soon as the loop
// device holds it, and the device detaches when the last reference to the
// mount goes (autoclear), so a crash leaves nothing but, for an image
// caught between creation and removal, a file that New sweeps.

// scratchDirs are where the images live, on disk: the first that is, or
// can be made, a root-owned directory reached without links.
var scratchDirs = []string{"/var/tmp/codeagent/upper"}

// useOverlays turns overlay workspaces on when they can be made here, and
// removes the images a crashed process left.
func (b *Backend) useOverlays() {
	if b.cfg.PlainWorkspace {
		return
	}
	err := overlayUsable()
	if err == nil {
		b.scratch, err = rootBaseDir(scratchDirs, 0o700)
	}
	if err != nil {
		b.log.Warn("the workspace is bound itself; its disk limit rests on the disk watcher", "reason", err)
		return
	}
	if n := stagingfs.Sweep(b.scratch); n > 0 {
		b.log.Info("removed upper-layer images left by a crash", "count", n)
	}
	stagingfs.KeepTemplates(b.scratch)
	b.overlays.Store(true)
}

// overlaysFailed turns overlay workspaces off after err, for good.
func (b *Backend) overlaysFailed(err error) {
	if b.overlays.Swap(false) {
		b.log.Warn("cannot make an overlay workspace; binding workspaces themselves from now on, their disk limit resting on the disk watcher", "err", err)
	}
}

// upperMinInodes is the fewest inodes an upper file system gets.
const upperMinInodes = 1024

// upperSize is the file system that holds a run's writes under lim: free
// bytes for the program (the disk limit and half a file size, like the
// Docker backend's staging file system), and inodes whose tables, written
// as entries are created, take at most another half file size (at least
// upperMinInodes, at most the watcher's cap on new entries and some).
func upperSize(lim sandbox.Limits) (free, size int64, inodes int) {
	free = lim.Disk + lim.FileSize/2
	inodes = int(min(max(lim.FileSize/2/256, upperMinInodes), diskwatch.MaxEntries+1024))
	size = free + int64(inodes)*256 + 4<<20 + free/64
	return free, size, inodes
}

// upperFS is a launcher's upper file system.
type upperFS struct {
	img      *os.File // the image, removed from its directory
	root     *os.File // the file system's root: upper/, work/ and the reserve
	upper    *os.File // root/upper, the overlay's upper directory
	capacity int64    // free bytes with an empty reserve
	inodes   int      // inodes in all

	mu        sync.Mutex
	baseUsed  int64 // blocks and inodes in use when the run started, for metering
	baseFiles int64
	metered   bool
}

// fits reports whether u can hold a run under lim with the bound of
// upperSize: enough space, and not so many inodes that their tables could
// pass half a file size.
func (u *upperFS) fits(lim sandbox.Limits) bool {
	free, _, inodes := upperSize(lim)
	return u.capacity >= free && u.inodes <= inodes+64
}

func (u *upperFS) close() {
	for _, f := range []*os.File{u.upper, u.root, u.img} {
		lateclose.Close(f) // the last reference unmounts it
	}
}

// makeUpper makes an upper file system for runs under lim and mounts it at
// the upper mount point in the mount namespace of the launcher whose pid
// arrives on pid (closed without one: the launcher did not start). The
// image is made and attached meanwhile.
func (b *Backend) makeUpper(pid <-chan int, lim sandbox.Limits, uid int) (*upperFS, error) {
	free, size, inodes := upperSize(lim)
	return b.makeUpperSized(pid, free, size, inodes, uid)
}

// makeUpperSized is makeUpper for a file system of size bytes and inodes
// inodes, leaving free bytes to the program, whose upper directory
// belongs to uid.
func (b *Backend) makeUpperSized(pid <-chan int, free, size int64, inodes int, uid int) (*upperFS, error) {
	img, err := stagingfs.NewImage(b.scratch)
	if err != nil {
		return nil, err
	}
	u := &upperFS{img: img}
	removed := false
	defer func() {
		if !removed {
			_ = os.Remove(img.Name())
		}
	}()
	fail := func(err error) (*upperFS, error) {
		u.close()
		return nil, err
	}
	if err := stagingfs.Format(img, size, inodes); err != nil {
		return fail(err)
	}
	dev, err := stagingfs.Attach(img)
	if err != nil {
		return fail(err)
	}
	removed = os.Remove(img.Name()) == nil // the device holds it now
	launcher, ok := <-pid
	if !ok {
		dev.Close()
		return fail(errors.New("the launcher did not start"))
	}
	err = inMountNamespace(launcher, func() error {
		if err := stagingfs.Mount(dev, b.upperPoint()); err != nil {
			return err
		}
		root, err := os.Open(b.upperPoint())
		u.root = root
		return err
	})
	dev.Close() // detaches now unless mounted; else with the last unmount
	if err != nil {
		return fail(err)
	}
	rfd := int(u.root.Fd())
	_ = unix.Unlinkat(rfd, "lost+found", unix.AT_REMOVEDIR)
	err = errors.Join(unix.Mkdirat(rfd, "upper", 0o755), unix.Mkdirat(rfd, "work", 0o700))
	if err == nil {
		err = unix.Fchownat(rfd, "upper", uid, uid, unix.AT_SYMLINK_NOFOLLOW)
	}
	if err != nil {
		return fail(fmt.Errorf("prepare the upper layer: %w", err))
	}
	ufd, err := unix.Openat(rfd, "upper", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fail(err)
	}
	u.upper = os.NewFile(uintptr(ufd), "upper")
	var st unix.Statfs_t
	if err := unix.Fstatfs(rfd, &st); err != nil {
		return fail(err)
	}
	u.capacity, u.inodes = int64(st.Bavail)*st.Bsize, int(st.Files)
	if _, err := stagingfs.Fit(u.root, free); err != nil {
		return fail(err)
	}
	return u, nil
}

// prepareUpper starts making l's upper file system in the background, as
// l starts (the image takes as long as the launcher's start); upperFor
// waits for it. The launcher's pid goes on the returned channel, which is
// closed afterwards, or closed alone when the launcher did not start.
func (b *Backend) prepareUpper(l *launcher) chan<- int {
	lim := b.upperLimits()
	l.upperDone = make(chan struct{})
	pid := make(chan int, 1)
	b.background(func() {
		defer close(l.upperDone)
		l.upper, l.upperErr = b.makeUpper(pid, lim, l.uid)
	})
	return pid
}

// pidOf is a channel that holds pid, for makeUpper.
func pidOf(pid int) <-chan int {
	c := make(chan int, 1)
	c <- pid
	close(c)
	return c
}

// upperLimits are the limits of the latest run: a warm launcher's upper
// file system is made for them.
func (b *Backend) upperLimits() sandbox.Limits {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.lastLimits.Disk == 0 {
		return sandbox.DefaultLimits()
	}
	return b.lastLimits
}

// upperFor returns l's upper file system, ready for a run under lim: the
// one made ahead if it fits, else a new one (the cold path).
func (b *Backend) upperFor(l *launcher, lim sandbox.Limits) (*upperFS, error) {
	b.mu.Lock()
	b.lastLimits = lim
	b.mu.Unlock()
	<-l.upperDone
	if l.upperErr == nil && !l.upper.fits(lim) {
		l.upper.close()
		l.upper, l.upperErr = b.makeUpper(pidOf(l.cmd.Process.Pid), lim, l.uid)
	}
	if l.upperErr != nil {
		return nil, l.upperErr
	}
	return l.upper, nil
}

// start readies u for a run under lim: the program gets Disk and half a
// file size of free space, the upper directory the workspace root's
// permission bits. It returns the watcher's limits: no more new entries
// than the file system has inodes.
func (u *upperFS) start(lim sandbox.Limits, wsMode uint32) (diskwatch.Limits, error) {
	dl := diskwatch.Limits{Bytes: lim.Disk}
	free, _, _ := upperSize(lim)
	inodes, err := stagingfs.Fit(u.root, free)
	if err != nil {
		return dl, err
	}
	if inodes-16 < diskwatch.MaxEntries {
		dl.Entries = max(inodes-16, 1)
	}
	if err := unix.Fchmod(int(u.upper.Fd()), wsMode&0o777); err != nil {
		return dl, err
	}
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(u.root.Fd()), &st); err != nil {
		return dl, err
	}
	u.mu.Lock()
	u.baseUsed, u.baseFiles, u.metered = int64(st.Blocks-st.Bfree)*st.Bsize, int64(st.Files-st.Ffree), true
	u.mu.Unlock()
	return dl, nil
}

// growth is how much of the host's disk u's run has taken so far: the
// blocks it allocated and the inode table of the entries it created.
func (u *upperFS) growth() int64 {
	u.mu.Lock()
	defer u.mu.Unlock()
	var st unix.Statfs_t
	if !u.metered || unix.Fstatfs(int(u.root.Fd()), &st) != nil {
		return 0
	}
	return int64(st.Blocks-st.Bfree)*st.Bsize - u.baseUsed + (int64(st.Files-st.Ffree)-u.baseFiles)*256
}

// watchPath is a path through which the disk watcher opens u's upper
// directory, which no path of the host's mount namespace reaches.
func (u *upperFS) watchPath() string { return "/proc/self/fd/" + strconv.Itoa(int(u.upper.Fd())) }

// ScratchGrowth is how much host disk the upper layers of the runs under
// way have taken (see upperFS.growth): the suite samples it to check that
// the bound holds during a run, not only in the workspace afterwards.
func (b *Backend) ScratchGrowth() int64 {
	b.mu.Lock()
	running := make([]*upperFS, 0, len(b.running))
	for u := range b.running {
		running = append(running, u)
	}
	b.mu.Unlock()
	var n int64
	for _, u := range running {
		n += u.growth()
	}
	return n
}

// upperPoint is where, in a launcher's mount namespace, its upper file
// system is mounted; lowerPoint is where the workspace is, under the
// overlay at mountPoint.
func (b *Backend) upperPoint() string { return filepath.Join(b.mnt, "up") }
func (b *Backend) lowerPoint() string { return filepath.Join(b.mnt, "lower") }

// attachOverlay mounts, in the mount namespace of launcher l, the
// workspace open as ws (its directory described by st) read-only and
// idmapped for l's uid (see idmapWorkspace) at the lower mount point, and
// the overlay of it and the upper layer at the workspace mount point,
// which bwrap then binds. The lower layer is the workspace's own file
// system only: a file system mounted below it shows as the empty
// directory it is mounted on. Directory renames are recorded in the upper
// layer (redirect_dir), files are copied up whole (no metacopy), hard
// links of the workspace are not followed across copy-up (no index), and
// the upper layer is scratch (volatile: fsync need not reach its disk).
func (b *Backend) attachOverlay(l *launcher, ws *os.File, st *unix.Stat_t) error {
	pid := l.cmd.Process.Pid
	tree, err := cloneWorkspace(ws, unix.MOUNT_ATTR_RDONLY, false)
	if err != nil {
		return err
	}
	defer unix.Close(tree)
	if err := b.idmapWorkspace(tree, st, l.uid); err != nil {
		return err
	}
	up := b.upperPoint()
	opts := "lowerdir=" + b.lowerPoint() + ",upperdir=" + up + "/upper,workdir=" + up + "/work" +
		",redirect_dir=on,index=off,metacopy=off,xino=off"
	return inMountNamespace(pid, func() error {
		if err := unix.MoveMount(tree, "", unix.AT_FDCWD, b.lowerPoint(), unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
			return fmt.Errorf("attach the workspace: %w", err)
		}
		err := unix.Mount("overlay", b.mountPoint(), "overlay", unix.MS_NOSUID|unix.MS_NODEV, opts+",volatile")
		if errors.Is(err, unix.EINVAL) {
			err = unix.Mount("overlay", b.mountPoint(), "overlay", unix.MS_NOSUID|unix.MS_NODEV, opts)
		}
		if err != nil {
			return fmt.Errorf("mount the overlay: %w", err)
		}
		return nil
	})
}

// overlayUsable says why overlays over workspaces cannot be made here, or
// nil. Opening the overlay file system type loads its module if need be.
func overlayUsable() error {
	if err := stagingfs.Usable(); err != nil {
		return err
	}
	fd, err := unix.Fsopen("overlay", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return fmt.Errorf("no overlay file system: %w", err)
	}
	return unix.Close(fd)
}

// overlay makes the workspace an overlay in l's mount namespace when
// overlays are on (see upperFS) and the spec does not ask for a live
// workspace, and returns its upper layer and the disk watcher's limits for
// it; a nil layer means that the workspace is to be bound itself. A
// workspace the overlay cannot be mounted over (its file system refuses to
// be a lower layer) is bound itself, with a warning.
func (r *run) overlay(l *launcher, wsFile *os.File, wsSt *unix.Stat_t) (*upperFS, diskwatch.Limits, error) {
	dl := diskwatch.Limits{Bytes: r.lim.Disk}
	if !r.b.overlays.Load() || l.upperDone == nil || r.spec.LiveWorkspace {
		return nil, dl, nil
	}
	up, err := r.b.upperFor(l, r.lim)
	if err == nil {
		dl, err = up.start(r.lim, wsSt.Mode)
	}
	if err != nil {
		r.b.overlaysFailed(err)
		return nil, diskwatch.Limits{Bytes: r.lim.Disk}, nil
	}
	if err := r.b.attachOverlay(l, wsFile, wsSt); err != nil {
		r.b.log.Warn("cannot mount an overlay over this workspace; binding it itself, its disk limit resting on the disk watcher", "workspace", wsFile.Name(), "err", err)
		return nil, diskwatch.Limits{Bytes: r.lim.Disk}, nil
	}
	r.b.mu.Lock()
	r.b.running[up] = struct{}{}
	r.b.mu.Unlock()
	return up, dl, nil
}

// unregister ends the metering of up's run.
func (b *Backend) unregister(up *upperFS) {
	b.mu.Lock()
	delete(b.running, up)
	b.mu.Unlock()
}
