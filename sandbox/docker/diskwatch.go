package docker

import (
	"io/fs"
	"path/filepath"
	"syscall"
	"time"
)

// watchDisk measures the staging directory dir until done is closed and
// calls over once when it grew past limit bytes beyond baseline or holds
// more than maxEntries entries. The first look is after 10 ms; the interval
// then grows with the cost of a walk (10 times it, within 10 ms and 1 s).
func watchDisk(dir string, baseline, limit int64, done <-chan struct{}, over func()) {
	interval := 10 * time.Millisecond
	for {
		select {
		case <-done:
			return
		case <-time.After(interval):
		}
		t := time.Now()
		size, n := usage(dir)
		if size-baseline > limit || n > maxEntries {
			over()
			return
		}
		interval = max(10*time.Millisecond, min(10*time.Since(t), time.Second))
	}
}

// usage sums the allocated bytes of the regular files under dir and counts
// its entries.
func usage(dir string) (int64, int) {
	var size int64
	n := 0
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		n++
		if d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				if st, ok := fi.Sys().(*syscall.Stat_t); ok {
					size += st.Blocks * 512
				}
			}
		}
		return nil
	})
	return size, n
}
