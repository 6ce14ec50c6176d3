package nofollow

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestOpenAndWalkAgree: openat2 and the per-component walk of old kernels
// give the same answer for each path a program could have planted: a link
// at any component (to a file, to a directory, to outside) is ELOOP, a
// way out of the directory EXDEV, and plain paths open.
func TestOpenAndWalkAgree(t *testing.T) {
	dir := t.TempDir()
	outside := t.TempDir()
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, "a/b"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "a/b/f.txt"), []byte("x"), 0o644))
	must(os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o600))
	must(os.Symlink(outside, filepath.Join(dir, "a/out")))
	must(os.Symlink("b", filepath.Join(dir, "a/in")))
	must(os.Symlink("f.txt", filepath.Join(dir, "a/b/lf")))
	d, err := os.Open(dir)
	must(err)
	defer d.Close()
	long := strings.Repeat("d/", 1100) // 2,200 components, 4,400 bytes: more than one openat2
	must(os.MkdirAll(filepath.Join(dir, long), 0o755))
	for _, c := range []struct {
		rel  string
		how  How
		want error // nil: opens
	}{
		{"a/b/f.txt", How{Flags: unix.O_RDONLY}, nil},
		{"", How{Flags: unix.O_PATH | unix.O_DIRECTORY}, nil},
		{"a/b", How{Flags: unix.O_RDONLY | unix.O_DIRECTORY, SameMount: true}, nil},
		{long, How{Flags: unix.O_PATH | unix.O_DIRECTORY}, nil},
		{"a/out/secret", How{Flags: unix.O_RDONLY}, unix.ELOOP},
		{"a/out", How{Flags: unix.O_PATH}, unix.ELOOP},
		{"a/out", How{Flags: unix.O_PATH | unix.O_DIRECTORY}, unix.ELOOP},
		{"a/in/f.txt", How{Flags: unix.O_RDONLY}, unix.ELOOP},
		{"a/b/lf", How{Flags: unix.O_RDONLY}, unix.ELOOP},
		{"a/b/lf", How{Flags: unix.O_PATH}, unix.ELOOP},
		{"../" + filepath.Base(outside) + "/secret", How{Flags: unix.O_RDONLY}, unix.EXDEV},
		{outside + "/secret", How{Flags: unix.O_RDONLY}, unix.EXDEV},
	} {
		for name, open := range map[string]func(int, string, How) (int, error){"Open": Open, "Walk": Walk} {
			fd, err := open(int(d.Fd()), c.rel, c.how)
			if err == nil {
				unix.Close(fd)
			}
			rel := c.rel
			if len(rel) > 40 {
				rel = rel[:40] + "..."
			}
			if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
				t.Errorf("%s(%s, %#x): %v, want %v", name, rel, c.how.Flags, err, c.want)
			}
		}
	}
}

// TestSameMount: with SameMount, a file system mounted below the directory
// is not entered, by Open or by Walk (root only: it mounts a tmpfs).
func TestSameMount(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	dir := t.TempDir()
	mnt := filepath.Join(dir, "m")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", mnt, "tmpfs", 0, "size=1m"); err != nil {
		t.Skipf("tmpfs: %v", err)
	}
	defer unix.Unmount(mnt, unix.MNT_DETACH)
	if err := os.WriteFile(filepath.Join(mnt, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for name, open := range map[string]func(int, string, How) (int, error){"Open": Open, "Walk": Walk} {
		if fd, err := open(int(d.Fd()), "m/f", How{Flags: unix.O_RDONLY, SameMount: true}); !errors.Is(err, unix.EXDEV) {
			unix.Close(fd)
			t.Errorf("%s across a mount: %v, want EXDEV", name, err)
		}
		fd, err := open(int(d.Fd()), "m/f", How{Flags: unix.O_RDONLY})
		if err != nil {
			t.Errorf("%s across a mount, allowed: %v", name, err)
		} else {
			unix.Close(fd)
		}
	}
}
