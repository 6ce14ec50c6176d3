//go:build linux && (amd64 || arm64)

package namespace

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"sort"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/sandbox/internal/diskwatch"
	"github.com/codeagent/codeagent/sandbox/internal/stagingfs"
	"github.com/codeagent/codeagent/sandbox/internal/wsperm"
)

// A kernel (Spec.LiveWorkspace) lives for hours, and its files must reach
// the workspace while it lives. Run as root, the backend gives it a copy
// of the workspace on a file system of its own (stagingfs, as for an
// overlay's upper layer) with room for the copy and the disk limit, so
// that what the kernel adds is bounded by construction (files it unlinks
// but holds open count), and it never writes the workspace itself. Sync
// (sandbox.Syncer) brings the copy and the workspace up to date with each
// other while every process of the sandbox is frozen and the workspace is
// locked (inWorkspace): what changed on one side since the last Sync is
// carried to the other, by package wsperm's rules into the workspace; an
// entry changed on both sides goes the way of the later change, and a
// removal never takes a change of the other side with it. Changes are
// found by comparing each side with what it was at the last Sync (kind,
// mode, owner, inode, size and ctime, which no program can set).

// maxSynced bounds the entries of a synced workspace: a copy of a
// folder of 100,000 files and what a session adds (each entry's stamp
// costs about 100 bytes, each Sync a stat of every entry on both sides).
const maxSynced = 400_000

// stamp identifies the state of an entry, for Sync.
type stamp struct {
	mode     uint32 // type and 0o7777 bits
	uid, gid uint32
	ino      uint64
	size     int64
	ctime    int64 // ns
}

func stampOf(st *unix.Stat_t) stamp {
	return stamp{mode: st.Mode, uid: st.Uid, gid: st.Gid, ino: st.Ino, size: st.Size, ctime: st.Ctim.Nano()}
}

func (s stamp) kind() uint32 { return s.mode & unix.S_IFMT }

// same reports whether an entry is as it was: a directory by kind, mode,
// owner and inode (entries made in it change its ctime, and they are
// compared themselves), anything else by all of its stamp.
func (s stamp) same(o stamp) bool {
	if s.kind() == unix.S_IFDIR && o.kind() == unix.S_IFDIR {
		return s.mode == o.mode && s.uid == o.uid && s.gid == o.gid && s.ino == o.ino
	}
	return s == o
}

// snapshot maps every entry below directory fd to its stamp.
func snapshot(fd int) (map[string]stamp, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, err
	}
	out := map[string]stamp{}
	err := walkSameDev(fd, st.Dev, "", func(_ int, rel, _ string, st *unix.Stat_t) error {
		if len(out) >= maxSynced {
			return fmt.Errorf("%w: more than %d entries in the workspace", errStopWalk, maxSynced)
		}
		out[rel] = stampOf(st)
		return nil
	})
	return out, err
}

// syncedWS is a kernel's copy of its workspace, and what Sync needs.
type syncedWS struct {
	ws    *os.File // the workspace, O_PATH
	up    *upperFS // the copy's file system; up.upper is the copy
	uid   int      // the sandbox's host uid: what the workspace's owner owns is its in the copy
	lim   sandbox.Limits
	cg    freezer // nil until the program runs
	watch *diskwatch.Watcher

	mu           sync.Mutex
	lastW, lastK map[string]stamp
	ended        bool
}

// syncedWorkspace copies the workspace open as ws into a new file system
// of its own for launcher l and returns it, with the disk watcher's limits
// for the copy.
func (r *run) syncedWorkspace(l *launcher, ws *os.File, wsSt *unix.Stat_t) (*syncedWS, diskwatch.Limits, error) {
	dl := diskwatch.Limits{Bytes: r.lim.Disk}
	var usage int64
	var entries int
	wfd, err := openBeneath(int(ws.Fd()), "")
	if err != nil {
		return nil, dl, err
	}
	err = walkSameDev(wfd, wsSt.Dev, "", func(_ int, _, _ string, st *unix.Stat_t) error {
		usage += st.Blocks*512 + diskwatch.InodeCost
		if entries++; entries > maxSynced {
			return fmt.Errorf("%w: more than %d entries in the workspace", errStopWalk, maxSynced)
		}
		return nil
	})
	unix.Close(wfd)
	if err != nil {
		return nil, dl, err
	}
	// Room for the copy and what others add to the workspace while the
	// kernel lives (sparse: the image takes disk only for blocks written),
	// in steps, so that few geometries (and templates) are made.
	if l.upperDone != nil {
		<-l.upperDone // mounted where the copy's file system goes, over it
	}
	free := r.lim.Disk + r.lim.FileSize/2
	size := roundUp(usage+free+1<<30+free/64, 1<<30)
	inodes := int(roundUp(int64(entries+2*diskwatch.MaxEntries+1024), 16384))
	up, err := r.b.makeUpperSized(pidOf(l.cmd.Process.Pid), free, size, inodes, l.uid)
	if err != nil {
		return nil, dl, err
	}
	if err := unix.Fchmod(int(up.upper.Fd()), wsSt.Mode&0o777); err != nil {
		up.close()
		return nil, dl, err
	}
	s := &syncedWS{ws: ws, up: up, uid: l.uid, lim: r.lim, lastW: map[string]stamp{}, lastK: map[string]stamp{}}
	if err := s.sync(context.Background(), false); err != nil {
		up.close()
		return nil, dl, fmt.Errorf("copy the workspace for the kernel: %w", err)
	}
	if err := s.fit(0); err != nil {
		up.close()
		return nil, dl, err
	}
	return s, dl, nil
}

func roundUp(n, step int64) int64 { return (n + step - 1) / step * step }

// fit leaves the program the disk limit's room, less what it has taken
// (growth, as the watcher charges it).
func (s *syncedWS) fit(growth int64) error {
	_, err := stagingfs.Fit(s.up.root, max(s.lim.Disk+s.lim.FileSize/2-max(growth, 0), 1<<20))
	return err
}

// Sync implements sandbox.Syncer (through the run's Running handle).
func (s *syncedWS) Sync(ctx context.Context) error { return s.sync(ctx, true) }

// sync brings the copy and the workspace up to date with each other; with
// live set the program may be running, and it is frozen meanwhile.
func (s *syncedWS) sync(ctx context.Context, live bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return errors.New("the program has ended")
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if live && s.quiet() {
		return nil // nothing changed on either side: no need to stop the program
	}
	wfd, unlock, err := lockWorkspace(ctx, int(s.ws.Fd()))
	if err != nil {
		return err
	}
	defer unlock()
	if live && s.cg != nil {
		if err := s.cg.Freeze(); err != nil {
			_ = s.cg.Thaw()
			return err
		}
		defer s.cg.Thaw()
	}
	// What others changed is not the program's: when the copy is to be
	// written, the watcher leaves it out and the file system's room is
	// made again around it.
	intoCopy := func() (after func() error, err error) {
		if !live || s.watch == nil {
			return func() error { return nil }, nil
		}
		release := s.watch.Hold()
		if err := stagingfs.Release(s.up.root); err != nil {
			release()
			return nil, err
		}
		return func() error {
			release()
			growth, _ := s.watch.Growth()
			return s.fit(growth)
		}, nil
	}
	return confined(wfd, func(wfd int) error {
		return s.exchange(wfd, int(s.up.upper.Fd()), intoCopy)
	})
}

// quiet reports whether neither side changed since the last sync, as far
// as a look at both without stopping the program or locking the
// workspace tells (freezing and thawing a sandbox costs milliseconds; most
// cells write nothing). A change made just after the look is carried at
// the next sync, as one made just after a sync would be.
func (s *syncedWS) quiet() bool {
	wfd, err := openBeneath(int(s.ws.Fd()), "")
	if err != nil {
		return false
	}
	defer unix.Close(wfd)
	curW, err := snapshot(wfd)
	if err != nil || !sameTree(s.lastW, curW) {
		return false
	}
	curK, err := snapshot(int(s.up.upper.Fd()))
	return err == nil && sameTree(s.lastK, curK)
}

// sameTree reports whether two snapshots of a tree show no change.
func sameTree(a, b map[string]stamp) bool {
	if len(a) != len(b) {
		return false
	}
	for rel, x := range a {
		if y, ok := b[rel]; !ok || !x.same(y) {
			return false
		}
	}
	return true
}

// end makes the last sync, once every process of the sandbox is gone:
// only the program's changes remain to be carried.
func (s *syncedWS) end() error {
	err := s.sync(context.Background(), false)
	s.mu.Lock()
	s.ended = true
	s.mu.Unlock()
	return err
}

// exchange carries the changes of each side to the other and notes both
// sides as they are afterwards. Before it writes the copy it calls
// intoCopy, and the function that returns afterwards.
func (s *syncedWS) exchange(wfd, kfd int, intoCopy func() (func() error, error)) error {
	curW, err := snapshot(wfd)
	if err != nil {
		return fmt.Errorf("read the workspace: %w", err)
	}
	curK, err := snapshot(kfd)
	if err != nil {
		return fmt.Errorf("read the kernel's copy: %w", err)
	}
	var rst unix.Stat_t
	if err := unix.Fstat(wfd, &rst); err != nil {
		return err
	}
	root := wsperm.NewRoot(rst.Uid, rst.Gid, rst.Mode)
	changed := func(last, cur map[string]stamp, rel string) bool {
		a, inA := last[rel]
		b, inB := cur[rel]
		return inA != inB || (inA && !a.same(b))
	}
	paths := map[string]bool{}
	for _, m := range []map[string]stamp{s.lastW, curW, s.lastK, curK} {
		for rel := range m {
			paths[rel] = true
		}
	}
	c := &copier{root: root, uid: s.uid, w: wfd, k: kfd, curW: curW, curK: curK, rep: newReplacer("sync")}
	var puts, removes []op
	for rel := range paths {
		wc, kc := changed(s.lastW, curW, rel), changed(s.lastK, curK, rel)
		if !wc && !kc {
			continue
		}
		fromK := kc
		if wc && kc {
			fromK = laterIsCopy(curW, curK, rel)
		}
		o := op{rel: rel, fromK: fromK}
		if _, present := map[bool]map[string]stamp{true: curK, false: curW}[fromK][rel]; present {
			puts = append(puts, o)
		} else {
			removes = append(removes, o)
		}
	}
	// Removals deepest first, then puts parents first.
	sort.Slice(removes, func(i, j int) bool { return removes[i].rel > removes[j].rel })
	sort.Slice(puts, func(i, j int) bool { return puts[i].rel < puts[j].rel })
	var errs []error
	toK := false
	for _, o := range append(removes, puts...) {
		toK = toK || !o.fromK
	}
	after := func() error { return nil }
	if toK {
		if after, err = intoCopy(); err != nil {
			return err
		}
	}
	for _, o := range removes {
		if err := c.remove(o); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", o.rel, err))
		}
	}
	for _, o := range puts {
		if err := c.put(o); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", o.rel, err))
		}
	}
	errs = append(errs, after())
	if s.lastW, err = snapshot(wfd); err != nil {
		errs = append(errs, err)
	}
	if s.lastK, err = snapshot(kfd); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// laterIsCopy decides an entry both sides changed: a change beats a
// removal, else the later change (ctime) wins.
func laterIsCopy(curW, curK map[string]stamp, rel string) bool {
	w, inW := curW[rel]
	k, inK := curK[rel]
	switch {
	case inW != inK:
		return inK
	case !inW:
		return true // removed on both sides
	}
	return k.ctime > w.ctime
}

// op carries one entry: from the copy to the workspace (fromK) or back.
type op struct {
	rel   string
	fromK bool
}

// parentOf opens the directory of rel in tree fd (made by mkdir, with its
// parents, where missing and mkdir is not nil) and returns it with rel's
// last name.
func parentOf(fd int, rel string, mkdir func(dir int, rel, name string) error) (int, string, error) {
	dir, base := path.Split(rel)
	dir = strings.TrimSuffix(dir, "/")
	if dir == "" {
		d, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
		return d, base, err
	}
	d, err := openBeneath(fd, dir)
	if errors.Is(err, unix.ENOENT) && mkdir != nil {
		up, name, perr := parentOf(fd, dir, mkdir)
		if perr != nil {
			return -1, "", perr
		}
		perr = mkdir(up, dir, name)
		unix.Close(up)
		if perr != nil && !errors.Is(perr, unix.EEXIST) {
			return -1, "", perr
		}
		d, err = openBeneath(fd, dir)
	}
	return d, base, err
}

// synced gives the program a copy of the workspace (see syncedWS) when it
// asks for a live workspace and codeagent can make the copy's file system
// (root, with overlays on), attached where bwrap binds the workspace; nil
// otherwise.
func (r *run) synced(l *launcher, ws *os.File, wsSt *unix.Stat_t) (*syncedWS, diskwatch.Limits, error) {
	dl := diskwatch.Limits{Bytes: r.lim.Disk}
	if !r.spec.LiveWorkspace || !r.b.overlays.Load() {
		return nil, dl, nil
	}
	sw, dl, err := r.syncedWorkspace(l, ws, wsSt)
	if err != nil {
		return nil, dl, err
	}
	if err := r.b.attachCopy(l); err != nil {
		sw.close()
		return nil, dl, err
	}
	return sw, dl, nil
}

// attachCopy binds, in launcher l's mount namespace, the copy on its file
// system (mounted at the upper mount point) where bwrap binds the
// workspace, nosuid and nodev.
func (b *Backend) attachCopy(l *launcher) error {
	return inMountNamespace(l.cmd.Process.Pid, func() error {
		tree, err := unix.OpenTree(unix.AT_FDCWD, b.upperPoint()+"/upper", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
		if err != nil {
			return fmt.Errorf("clone the workspace's copy: %w", err)
		}
		defer unix.Close(tree)
		a := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}
		if err := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH, &a); err != nil {
			return err
		}
		if err := unix.MoveMount(tree, "", unix.AT_FDCWD, b.mountPoint(), unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
			return fmt.Errorf("attach the workspace's copy: %w", err)
		}
		return nil
	})
}

// freezeWith makes the sandbox whose first process is pid (blocked before
// it runs the program) freezable through cg for Sync.
func (s *syncedWS) freezeWith(cg runCgroup, pid int) error {
	f, ok := cg.(freezer)
	if !ok || cg == nil {
		return errors.New("the sandbox has no cgroup to freeze it with")
	}
	if err := f.JoinFreezer(pid); err != nil {
		return err
	}
	s.cg = f
	return nil
}

// close releases the copy's file system.
func (s *syncedWS) close() {
	s.mu.Lock()
	s.ended = true
	s.mu.Unlock()
	s.up.close()
}
