package stagingfs

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
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

// TestKeptTemplate: with KeepTemplates, the template outlives the process
// (a file in the directory, root's, read-only to others), and a later
// process (here: the cache emptied) copies it; a file there that is not a
// plain template of the geometry's size is not used.
func TestKeptTemplate(t *testing.T) {
	if _, err := exec.LookPath("mke2fs"); err != nil || os.Geteuid() != 0 {
		t.Skip("needs mke2fs and root (the kept file must be root's)")
	}
	dir := t.TempDir()
	KeepTemplates(dir)
	defer KeepTemplates("")
	reset := func() {
		templates.Lock()
		for _, f := range templates.m {
			f.Close()
		}
		templates.m = map[geometry]*os.File{}
		templates.Unlock()
	}
	reset()
	defer reset()
	g := geometry{48 << 20, 3072}
	format := func() {
		t.Helper()
		img, err := NewImage(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer os.Remove(img.Name())
		defer img.Close()
		if err := Format(img, g.size, g.inodes); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("e2fsck", "-fn", img.Name()).CombinedOutput(); err != nil {
			t.Fatalf("e2fsck: %v\n%s", err, out)
		}
	}
	format()
	kept := filepath.Join(dir, templateName(g))
	fi, err := os.Lstat(kept)
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o022 != 0 {
		t.Fatalf("kept template: %v %v", fi, err)
	}
	reset()
	format() // from the kept file
	templates.Lock()
	var st, kst unix.Stat_t
	_ = unix.Fstat(int(templates.m[g].Fd()), &st)
	templates.Unlock()
	_ = unix.Stat(kept, &kst)
	if st.Ino != kst.Ino {
		t.Fatal("the later process did not use the kept template")
	}
	// A kept file of the wrong size (or a link) is passed over.
	reset()
	if err := os.Remove(kept); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/passwd", kept); err != nil {
		t.Fatal(err)
	}
	format()
	templates.Lock()
	_ = unix.Fstat(int(templates.m[g].Fd()), &st)
	templates.Unlock()
	if pw, _ := os.Stat("/etc/passwd"); pw.Sys().(*syscall.Stat_t).Ino == st.Ino {
		t.Fatal("a link in the template's place was followed")
	}
}
