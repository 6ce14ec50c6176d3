package docker

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestStagingFSBound: whatever is written, fallocated or created, the
// staging file system refuses what goes past its free space, and its image
// takes no more of the host. Needs root and loop devices.
func TestStagingFSBound(t *testing.T) {
	if err := stagingUsable(); err != nil {
		t.Skipf("no staging file systems here: %v", err)
	}
	dir := t.TempDir()
	t0 := time.Now()
	s, err := mountStaging(dir, 10<<20)
	if err != nil {
		t.Fatal(err)
	}
	made := time.Since(t0)
	defer func() {
		if err := removeTree(dir); err != nil {
			t.Error(err)
		}
		if mounted(dir) {
			t.Error("a staging file system is still mounted after removeTree")
		}
	}()
	ws := filepath.Join(s.dir, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	t1 := time.Now()
	if _, err := s.fit(10<<20 + 512<<10); err != nil {
		t.Fatal(err)
	}
	t.Logf("made and mounted in %v, fitted in %v", made, time.Since(t1))
	img0 := allocated(t, filepath.Join(dir, "fs.img"))

	f, err := os.Create(filepath.Join(ws, "keep"))
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_KEEP_SIZE, 0, 200<<20); !errors.Is(err, unix.ENOSPC) {
		t.Errorf("fallocate of 200 MiB: %v, want ENOSPC", err)
	}
	f.Close()
	_ = os.Remove(filepath.Join(ws, "keep"))
	chunk := make([]byte, 1<<20)
	for i := range chunk {
		chunk[i] = 1
	}
	var wrote int64
	for i := 0; i < 40 && err == nil; i++ {
		var g *os.File
		if g, err = os.Create(filepath.Join(ws, "f"+string(rune('a'+i)))); err == nil {
			var n int
			n, err = g.Write(chunk)
			wrote += int64(n)
			if cerr := g.Close(); err == nil {
				err = cerr
			}
		}
	}
	if !errors.Is(err, unix.ENOSPC) || wrote > 10<<20+512<<10 {
		t.Errorf("wrote %d bytes and then %v; want ENOSPC by 10.5 MiB", wrote, err)
	}
	dirs := 0
	for ; dirs < 100_000; dirs++ {
		if err := os.Mkdir(filepath.Join(ws, "d"+strconv.Itoa(dirs)), 0o755); err != nil {
			break
		}
	}
	t.Logf("%d directories more", dirs)
	syscall.Sync()
	if grew := allocated(t, filepath.Join(dir, "fs.img")) - img0; grew > 11<<20 {
		t.Errorf("the image grew by %d bytes on the host", grew)
	}
}

func allocated(t *testing.T, p string) int64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	return st.Blocks * 512
}

func mounted(dir string) bool {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	return strings.Contains(string(b), " "+dir)
}
