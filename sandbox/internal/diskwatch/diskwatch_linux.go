package diskwatch

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/codeagent/codeagent/internal/lateclose"
)

// Watcher enforces Limits on one directory tree until stopped.
type Watcher struct {
	lim    Limits
	over   func()
	rootFd int
	wakeFd int // an eventfd that Stop signals

	readMu    sync.Mutex // serializes reading and closing the inotify instance (loop, Settle, Stop)
	settleBuf []byte
	mu        sync.Mutex // guards t and ifd
	t         *tree
	ifd       int // the inotify instance; -1 in walk-only mode
	baseCost  int64
	baseNames int
	rebuilds  int // after overflows, for tests

	exceeded    atomic.Bool
	held        atomic.Bool // see Hold
	stopping    atomic.Bool
	stop        chan struct{}
	loopDone    chan struct{}
	backstopEnd chan struct{}
}

// Start measures dir, watches every directory in it, and calls over once,
// from another goroutine, as soon as the tree grows past lim. Without
// inotify (or openat2) it falls back to frequent full walks.
func Start(dir string, lim Limits, over func()) (*Watcher, error) {
	if lim.Entries <= 0 {
		lim.Entries = MaxEntries
	}
	rootFd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", dir, err)
	}
	w := &Watcher{lim: lim, over: over, rootFd: rootFd, wakeFd: -1, stop: make(chan struct{}), loopDone: make(chan struct{}), backstopEnd: make(chan struct{})}
	ifd := newInotify(rootFd)
	if ifd >= 0 {
		if w.wakeFd, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err != nil {
			unix.Close(ifd)
			ifd = -1
		}
	}
	t, err := newTree(rootFd, ifd)
	if err != nil {
		w.closeFds(ifd)
		return nil, fmt.Errorf("measure %s: %w", dir, err)
	}
	w.t, w.ifd, w.baseCost, w.baseNames = t, ifd, t.cost, t.names
	if ifd >= 0 {
		go w.loop()
	} else {
		close(w.loopDone)
	}
	go w.backstop()
	return w, nil
}

// newInotify returns a new inotify instance, or -1 when there is none.
// The tree resolves paths below rootFd with package nofollow, which works
// without openat2 too.
func newInotify(int) int {
	ifd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return -1
	}
	return ifd
}

func (w *Watcher) closeFds(ifd int) {
	unix.Close(w.rootFd)
	if w.wakeFd >= 0 {
		unix.Close(w.wakeFd)
	}
	if ifd >= 0 {
		closeLater(ifd)
	}
}

// Stop accounts for the events still queued, stops watching and reports
// whether the tree went past its limits at any time.
func (w *Watcher) Stop() bool {
	if w.stopping.Swap(true) {
		return w.exceeded.Load()
	}
	close(w.stop)
	if w.wakeFd >= 0 {
		_, _ = unix.Write(w.wakeFd, []byte{1, 0, 0, 0, 0, 0, 0, 0})
	}
	<-w.loopDone
	<-w.backstopEnd
	w.mu.Lock()
	walkOnly, ifd := w.ifd < 0 || w.t.watchFailed, w.ifd
	w.mu.Unlock()
	if walkOnly && !w.exceeded.Load() {
		w.check(walk(w.rootFd))
	}
	w.readMu.Lock()
	w.closeFds(ifd)
	w.readMu.Unlock()
	return w.exceeded.Load()
}

// Settle accounts for the events queued so far, as the watcher would a
// moment later, and reports whether the tree has gone past its limits
// (over has then been called). It is for a caller that reports on part of
// a run, a kernel's cell: writes a program made just before it said it was
// done are counted before that is believed.
func (w *Watcher) Settle() bool {
	w.readMu.Lock()
	defer w.readMu.Unlock()
	if w.exceeded.Load() || w.stopping.Load() {
		return w.exceeded.Load()
	}
	w.mu.Lock()
	walkOnly := w.ifd < 0 || w.t.watchFailed
	w.mu.Unlock()
	if walkOnly {
		w.check(walk(w.rootFd))
	} else {
		if w.settleBuf == nil {
			w.settleBuf = make([]byte, 16<<10)
		}
		w.drain(w.settleBuf)
	}
	return w.exceeded.Load()
}

// Growth is how much the tree has grown since Start, as charged, and by how
// many names.
func (w *Watcher) Growth() (int64, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.t.cost - w.baseCost, w.t.names - w.baseNames
}

// Hold keeps the watcher from acting on changes to the tree until the
// returned release is called, and takes what changed meanwhile out of the
// growth it counts: for changes that the tree's owner, not the program,
// makes while the program is stopped (a kernel's copy of its workspace
// brought up to date by codeagent). The program's writes before the call
// count as ever; release checks the limits again.
func (w *Watcher) Hold() (release func()) {
	cost0, names0, _ := w.measure()
	w.held.Store(true)
	return func() {
		cost, names, deep := w.measure()
		w.mu.Lock()
		w.baseCost += cost - cost0
		w.baseNames += names - names0
		w.mu.Unlock()
		w.held.Store(false)
		w.check(cost, names, deep)
	}
}

// measure accounts for the events queued now (or walks the tree, without
// events) and returns the tree's cost, names and whether it is too deep,
// checking the limits unless held.
func (w *Watcher) measure() (int64, int, bool) {
	w.readMu.Lock()
	defer w.readMu.Unlock()
	w.mu.Lock()
	walkOnly := w.ifd < 0 || w.t.watchFailed
	w.mu.Unlock()
	if walkOnly {
		cost, names, deep := walk(w.rootFd)
		w.check(cost, names, deep)
		return cost, names, deep
	}
	if !w.stopping.Load() {
		if w.settleBuf == nil {
			w.settleBuf = make([]byte, 16<<10)
		}
		w.drain(w.settleBuf)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.t.cost, w.t.names, w.t.tooDeep
}

func (w *Watcher) check(cost int64, names int, tooDeep bool) {
	if w.held.Load() {
		return
	}
	w.mu.Lock()
	baseCost, baseNames := w.baseCost, w.baseNames
	w.mu.Unlock()
	if cost-baseCost > w.lim.Bytes || names-baseNames > w.lim.Entries || tooDeep {
		if !w.exceeded.Swap(true) && w.over != nil {
			w.over()
		}
	}
}

// loop reads inotify events and accounts for each read at once. It has a
// thread of its own, blocked in poll(2), which the kernel wakes directly
// when events arrive. Where allowed (root) the thread is real-time
// (SCHED_FIFO, the lowest priority), else at nice -10: a program that keeps
// every CPU busy writing would otherwise delay its wake-up by milliseconds,
// during which it writes megabytes. A storm of events (many small writes,
// each overshooting little) puts the thread back to nice -10 for the rest
// of the run, so that the watcher cannot take a CPU from everything else.
//
// The thread goes back to the runtime as it was: ending it instead would
// kill the children it may have started for others (bwrap's
// --die-with-parent follows the thread that forked it).
func (w *Watcher) loop() {
	defer close(w.loopDone)
	runtime.LockOSThread()
	realtime := false
	if orig, err := unix.SchedGetAttr(0, 0); err != nil {
		runtime.UnlockOSThread() // no boost without a way back
	} else {
		defer func() {
			if unix.SchedSetAttr(0, orig, 0) == nil {
				runtime.UnlockOSThread()
			}
		}()
		realtime = unix.SchedSetAttr(0, &unix.SchedAttr{Policy: schedFIFO, Priority: 1}, 0) == nil
		if !realtime {
			_ = unix.SchedSetAttr(0, &unix.SchedAttr{Policy: schedOther, Nice: -10}, 0)
		}
	}
	buf := make([]byte, 64<<10)
	for {
		fds := []unix.PollFd{{Fd: int32(w.ifd), Events: unix.POLLIN}, {Fd: int32(w.wakeFd), Events: unix.POLLIN}}
		if _, err := unix.Poll(fds, -1); err != nil && !errors.Is(err, unix.EINTR) {
			return
		}
		w.readMu.Lock()
		reads := w.drain(buf) // also when stopping: what is queued still counts
		w.readMu.Unlock()
		if w.stopping.Load() || w.exceeded.Load() {
			return
		}
		if realtime && reads >= stormReads {
			realtime = false
			_ = unix.SchedSetAttr(0, &unix.SchedAttr{Policy: schedOther, Nice: -10}, 0)
		}
	}
}

// Scheduling policies (sched(7)).
const (
	schedOther = 0
	schedFIFO  = 1
)

// stormReads full reads of events at one wake-up make a storm.
const stormReads = 16

// drain handles every event queued now, a read at a time, and returns how
// many reads it took.
func (w *Watcher) drain(buf []byte) int {
	for i := 0; i < 1024; i++ {
		n, err := unix.Read(w.ifd, buf)
		if err != nil || n <= 0 {
			return i
		}
		w.handle(buf[:n])
	}
	return 1024
}

// handle parses one read of events, updates the account and checks it.
func (w *Watcher) handle(buf []byte) {
	w.mu.Lock()
	cost, names, tooDeep := w.handleLocked(buf)
	w.mu.Unlock()
	w.check(cost, names, tooDeep)
}

func (w *Watcher) handleLocked(buf []byte) (int64, int, bool) {
	t := w.t
	changed := map[*node]map[string]bool{}
	var moves []move
	from := map[uint32]struct {
		n    *node
		name string
	}{}
	overflow := false
	for off := 0; off+unix.SizeofInotifyEvent <= len(buf); {
		ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
		nameBytes := buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+int(ev.Len)]
		off += unix.SizeofInotifyEvent + int(ev.Len)
		if ev.Mask&unix.IN_Q_OVERFLOW != 0 {
			overflow = true
			continue
		}
		n := t.dirs[int(ev.Wd)]
		if n == nil {
			continue
		}
		if ev.Mask&unix.IN_IGNORED != 0 {
			delete(t.dirs, int(ev.Wd))
			n.wd = -1
			continue
		}
		name := cstring(nameBytes)
		if name == "" {
			continue // the directory itself: its parent's events tell
		}
		if ev.Mask&unix.IN_ISDIR != 0 {
			if ev.Mask&unix.IN_MOVED_FROM != 0 {
				from[ev.Cookie] = struct {
					n    *node
					name string
				}{n, name}
			} else if f, ok := from[ev.Cookie]; ok && ev.Mask&unix.IN_MOVED_TO != 0 {
				moves = append(moves, move{from: f.n, fromName: f.name, to: n, toName: name})
			}
		}
		if changed[n] == nil {
			changed[n] = map[string]bool{}
		}
		changed[n][name] = true
		switch {
		case ev.Mask&(unix.IN_CLOSE_WRITE|unix.IN_DELETE|unix.IN_MOVED_FROM) != 0:
			t.heat(n, name, false)
		case ev.Mask&(unix.IN_CREATE|unix.IN_MODIFY) != 0 && ev.Mask&unix.IN_ISDIR == 0:
			t.heat(n, name, true)
		}
	}
	if !overflow {
		t.update(changed, moves)
	}
	if overflow || t.needScan {
		w.rebuild()
	}
	return w.t.cost, w.t.names, w.t.tooDeep
}

// rebuild starts the account afresh after the kernel dropped events: a new
// inotify instance (closing the old one drops all its watches at once) and
// a full scan. Only the loop, which called it, uses ifd without w.mu.
func (w *Watcher) rebuild() {
	ifd := newInotify(w.rootFd)
	t, err := newTree(w.rootFd, ifd)
	if err != nil {
		if ifd >= 0 {
			unix.Close(ifd)
		}
		return
	}
	if ifd < 0 {
		t.watchFailed = true // walks only from now on
		ifd = w.ifd          // kept until Stop
		t.ifd = -1
	} else {
		closeLater(w.ifd)
	}
	w.t, w.ifd = t, ifd
	w.rebuilds++
}

// closeLater closes an inotify instance in the background: the kernel
// waits for an RCU grace period before close returns, which takes from 0.1
// to 15 ms here, and nothing needs to wait for it (see package lateclose).
func closeLater(fd int) {
	lateclose.CloseLater(lateclose.FD(fd, "inotify"))
}

func cstring(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

// backstop walks the whole tree now and then and checks the limits from
// scratch, independently of the events: the interval is 20 times the cost
// of a walk, at least minBackstop (walkOnlyInterval without watches).
func (w *Watcher) backstop() {
	defer close(w.backstopEnd)
	w.mu.Lock()
	degraded := w.ifd < 0 || w.t.watchFailed
	w.mu.Unlock()
	interval := minBackstop
	if degraded {
		interval = walkOnlyInterval
	}
	timer := time.NewTimer(interval)
	defer timer.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-timer.C:
		}
		start := time.Now()
		cost, names, tooDeep := walk(w.rootFd)
		w.check(cost, names, tooDeep)
		if w.exceeded.Load() {
			return
		}
		w.mu.Lock()
		degraded = w.ifd < 0 || w.t.watchFailed
		w.mu.Unlock()
		next := max(minBackstop, 20*time.Since(start))
		if degraded {
			next = max(walkOnlyInterval, 10*time.Since(start))
		}
		timer.Reset(next)
	}
}
