package docker

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/codeagent/codeagent/sandbox"
)

func blocks(t *testing.T, p string) int64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	return st.Blocks * 512
}

// TestCopyBackKeepsHoles: sparse files and blocks of zeros come back as
// holes, data as data, sizes unchanged.
func TestCopyBackKeepsHoles(t *testing.T) {
	ws, st := t.TempDir(), t.TempDir()
	snap, err := stageIn(ws, st, -1)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(st, "sparse"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("end"), 64<<20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	write(t, filepath.Join(st, "zeros"), string(make([]byte, 4<<20)))
	data := make([]byte, 300<<10)
	_, _ = rand.Read(data)
	write(t, filepath.Join(st, "data"), string(data))
	snap.budget = &budget{limit: 10 << 20}
	if err := stageOut(st, ws, snap, nil); err != nil {
		t.Fatal(err)
	}
	if b := blocks(t, filepath.Join(ws, "sparse")); b > 64<<10 {
		t.Errorf("a sparse file of 64 MiB takes %d bytes after the copy back", b)
	}
	if b := blocks(t, filepath.Join(ws, "zeros")); b > 64<<10 {
		t.Errorf("4 MiB of zeros take %d bytes after the copy back", b)
	}
	for name, size := range map[string]int64{"sparse": 64<<20 + 3, "zeros": 4 << 20} {
		if fi, err := os.Stat(filepath.Join(ws, name)); err != nil || fi.Size() != size {
			t.Errorf("%s: %v, size %d, want %d", name, err, fi.Size(), size)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(ws, "data")); !bytes.Equal(got, data) {
		t.Errorf("data differs after the copy back")
	}
	if snap.budget.skipped != 0 {
		t.Errorf("%d entries left behind", snap.budget.skipped)
	}
}

// TestCopyBackBudget: what does not fit in the disk limit stays behind
// and the verdict says so.
func TestCopyBackBudget(t *testing.T) {
	ws, st := t.TempDir(), t.TempDir()
	snap, err := stageIn(ws, st, -1)
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 512<<10)
	for i := range 6 {
		_, _ = rand.Read(data)
		write(t, filepath.Join(st, fmt.Sprintf("d%d/f", i)), string(data))
	}
	const limit = 1200 << 10
	snap.budget = &budget{limit: limit}
	if err := stageOut(st, ws, snap, nil); err != nil {
		t.Fatal(err)
	}
	var used int64
	_ = filepath.Walk(ws, func(p string, fi os.FileInfo, err error) error {
		if err == nil && p != ws {
			used += blocks(t, p)
		}
		return nil
	})
	if used > limit || snap.budget.skipped == 0 {
		t.Fatalf("copy back took %d bytes under a budget of %d, %d entries skipped", used, limit, snap.budget.skipped)
	}
	res := sandbox.Result{Status: sandbox.StatusOK}
	snap.budget.note(&res, sandbox.Limits{Disk: limit})
	if res.Status != sandbox.StatusSignaled || !strings.Contains(res.Message, "disk limit") || !strings.Contains(res.Message, "not copied back") {
		t.Fatalf("verdict %s %q", res.Status, res.Message)
	}
}
