//go:build !linux

package diskwatch

import (
	"io/fs"
	"path/filepath"
	"sync/atomic"
	"time"
)

// Watcher enforces Limits on one directory tree until stopped. Without
// inotify it walks the tree every walkOnlyInterval (at least 10 times the
// cost of a walk), charging each entry its size and InodeCost.
type Watcher struct {
	dir        string
	lim        Limits
	base, cost atomic.Int64
	baseN, n   atomic.Int64
	exceeded   atomic.Bool
	stop, done chan struct{}
}

// Start measures dir and calls over once, from another goroutine, when the
// tree grew past lim.
func Start(dir string, lim Limits, over func()) (*Watcher, error) {
	if lim.Entries <= 0 {
		lim.Entries = MaxEntries
	}
	c, n, err := walkDir(dir)
	if err != nil {
		return nil, err
	}
	w := &Watcher{dir: dir, lim: lim, stop: make(chan struct{}), done: make(chan struct{})}
	w.base.Store(c)
	w.cost.Store(c)
	w.baseN.Store(int64(n))
	w.n.Store(int64(n))
	go func() {
		defer close(w.done)
		interval := walkOnlyInterval
		for {
			select {
			case <-w.stop:
				return
			case <-time.After(interval):
			}
			t := time.Now()
			if w.measure() && !w.exceeded.Swap(true) && over != nil {
				over()
				return
			}
			interval = max(walkOnlyInterval, 10*time.Since(t))
		}
	}()
	return w, nil
}

func (w *Watcher) measure() bool {
	c, n, _ := walkDir(w.dir)
	w.cost.Store(c)
	w.n.Store(int64(n))
	return c-w.base.Load() > w.lim.Bytes || int64(n)-w.baseN.Load() > int64(w.lim.Entries)
}

// Stop stops watching and reports whether the tree went past its limits.
func (w *Watcher) Stop() bool {
	close(w.stop)
	<-w.done
	if !w.exceeded.Load() && w.measure() {
		w.exceeded.Store(true)
	}
	return w.exceeded.Load()
}

// Settle reports whether the tree has gone past its limits so far.
func (w *Watcher) Settle() bool { return w.exceeded.Load() }

// Hold keeps changes to the tree until release out of the growth counted
// (see the Linux watcher's Hold).
func (w *Watcher) Hold() (release func()) {
	c0, n0, _ := walkDir(w.dir)
	return func() {
		c, n, _ := walkDir(w.dir)
		w.base.Add(c - c0)
		w.baseN.Add(int64(n - n0))
	}
}

// Growth is how much the tree has grown since Start, and by how many names.
func (w *Watcher) Growth() (int64, int) {
	return w.cost.Load() - w.base.Load(), int(w.n.Load() - w.baseN.Load())
}

func walkDir(dir string) (int64, int, error) {
	var c int64
	n := -1 // the root is not a name
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		n++
		if fi, err := d.Info(); err == nil {
			c += max(fi.Size(), 4096) + InodeCost
		}
		return nil
	})
	return c, n, err
}
