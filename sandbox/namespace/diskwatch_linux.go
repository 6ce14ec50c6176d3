//go:build linux && (amd64 || arm64)

package namespace

import (
	"io/fs"
	"path/filepath"
	"syscall"
	"time"
)

// diskWatch enforces the workspace's disk limit. The kernel enforces the size
// of each file (RLIMIT_FSIZE) and of /tmp (tmpfs), but the workspace is a
// host directory, so its growth is measured by walking it: first after a
// short delay, then at an interval that grows with the cost of a walk
// (ten times the walk, so that watching takes at most a tenth of a core).
// Overshoot is bounded by what a program can write in one interval.
type diskWatch struct {
	dir      string
	limit    int64
	baseline int64
	entries  int
}

// maxNewEntries caps how many files and directories a run may add, so that
// a flood of empty files is stopped as well.
const maxNewEntries = 100000

// A program can write about a gigabyte a second, so the interval bounds the
// overshoot to some 10 MB; walking a small workspace costs microseconds.
const (
	firstCheck  = 10 * time.Millisecond
	minInterval = 10 * time.Millisecond
)

func newDiskWatch(dir string, limit int64) (*diskWatch, error) {
	used, n, err := usage(dir)
	if err != nil {
		return nil, err
	}
	return &diskWatch{dir: dir, limit: limit, baseline: used, entries: n}, nil
}

// watch calls exceeded once the workspace grew past its limit, and returns
// when done is closed.
func (w *diskWatch) watch(done <-chan struct{}, exceeded func()) {
	t := time.NewTimer(firstCheck)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
		}
		start := time.Now()
		used, n, err := usage(w.dir)
		if err == nil && (used-w.baseline > w.limit || n-w.entries > maxNewEntries) {
			exceeded()
			return
		}
		t.Reset(max(minInterval, 10*time.Since(start)))
	}
}

// usage returns the bytes allocated to regular files below dir and the number
// of entries. It never follows symlinks.
func usage(dir string) (int64, int, error) {
	var total int64
	n := 0
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // vanished or unreadable entries are not counted
		}
		n++
		if !d.Type().IsRegular() {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			total += st.Blocks * 512
		} else {
			total += fi.Size()
		}
		return nil
	})
	return total, n, err
}
