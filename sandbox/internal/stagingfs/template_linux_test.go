package stagingfs

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// TestFormatFromTemplate: images after the first of a geometry are copies
// of a template, and each is a clean ext4 of that geometry; another
// geometry gets its own.
func TestFormatFromTemplate(t *testing.T) {
	if _, err := exec.LookPath("mke2fs"); err != nil {
		t.Skip("no mke2fs")
	}
	dir := t.TempDir()
	check := func(size int64, inodes int) {
		t.Helper()
		img, err := NewImage(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer img.Close()
		if err := Format(img, size, inodes); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("e2fsck", "-fn", img.Name()).CombinedOutput(); err != nil {
			t.Fatalf("e2fsck: %v\n%s", err, out)
		}
		out, err := exec.Command("dumpe2fs", "-h", img.Name()).CombinedOutput()
		if err != nil {
			t.Fatalf("dumpe2fs: %v\n%s", err, out)
		}
		var gotInodes, blocks int64
		for _, line := range strings.Split(string(out), "\n") {
			k, v, _ := strings.Cut(line, ":")
			switch strings.TrimSpace(k) {
			case "Inode count":
				gotInodes, _ = strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			case "Block count":
				blocks, _ = strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			}
		}
		if gotInodes < int64(inodes) || blocks*4096 != (size+4095)&^4095 {
			t.Fatalf("%d inodes, %d bytes; want at least %d inodes, %d bytes", gotInodes, blocks*4096, inodes, size)
		}
		var st os.FileInfo
		if st, err = img.Stat(); err != nil || st.Size() != (size+4095)&^4095 {
			t.Fatalf("image size %v, %v", st, err)
		}
		_ = os.Remove(img.Name())
	}
	check(64<<20, 4096)
	check(64<<20, 4096) // from the template
	check(32<<20, 2048) // another geometry
	templates.Lock()
	n := len(templates.m)
	templates.Unlock()
	if n < 2 {
		t.Fatalf("%d templates, want one per geometry", n)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 0 {
		t.Fatalf("left in the directory: %v", entries)
	}
}
