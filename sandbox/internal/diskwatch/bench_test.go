//go:build linux

package diskwatch

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// BenchmarkWalk measures a full walk (the backstop, and a rebuild after an
// overflow, which also adds the watches) of trees of empty files in
// directories of 1000; it is how MaxEntries was chosen.
func BenchmarkWalk(b *testing.B) {
	for _, n := range []int{1000, 20_000, 100_000} {
		dir := b.TempDir()
		for i := range n {
			d := filepath.Join(dir, fmt.Sprint(i/1000))
			if i%1000 == 0 {
				if err := os.Mkdir(d, 0o755); err != nil {
					b.Fatal(err)
				}
			}
			if err := os.WriteFile(filepath.Join(d, fmt.Sprint(i)), nil, 0o644); err != nil {
				b.Fatal(err)
			}
		}
		fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("Walk%d", n), func(b *testing.B) {
			for range b.N {
				walk(fd)
			}
		})
		b.Run(fmt.Sprintf("Start%d", n), func(b *testing.B) {
			for range b.N {
				w, err := Start(dir, Limits{Bytes: 1 << 40}, nil)
				if err != nil {
					b.Fatal(err)
				}
				w.Stop()
			}
		})
		unix.Close(fd)
	}
}

// BenchmarkStartStop is what a watcher adds to a run on an empty
// workspace: the scan, the inotify instance and its thread, and Stop.
func BenchmarkStartStop(b *testing.B) {
	dir := b.TempDir()
	for range b.N {
		w, err := Start(dir, Limits{Bytes: 1 << 20}, nil)
		if err != nil {
			b.Fatal(err)
		}
		w.Stop()
	}
}
