package wsperm

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

func TestFileMode(t *testing.T) {
	for m, want := range map[uint32]fs.FileMode{
		0o755:  0o755,
		0o2775: 0o775 | fs.ModeSetgid,
		0o4700: 0o700 | fs.ModeSetuid,
		0o1777: 0o777 | fs.ModeSticky,
	} {
		if got := FileMode(m); got != want {
			t.Errorf("FileMode(%#o) = %v, want %v", m, got, want)
		}
	}
}

// TestRemoveAllKeepsMounts: RemoveAll removes a tree but nothing of a file
// system mounted in it, nor the directories above that mount.
func TestRemoveAllKeepsMounts(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounts a file system")
	}
	ws := t.TempDir()
	mnt := filepath.Join(ws, "data/sub/mnt")
	for _, d := range []string{mnt, filepath.Join(ws, "data/other"), filepath.Join(ws, "plain/deep")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := unix.Mount("tmpfs", mnt, "tmpfs", 0, "size=1m"); err != nil {
		t.Skipf("mount tmpfs: %v", err)
	}
	defer unix.Unmount(mnt, unix.MNT_DETACH)
	if err := os.WriteFile(filepath.Join(mnt, "secret"), []byte("s"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := os.OpenRoot(ws)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	_, st, err := RootOf(r)
	if err != nil {
		t.Fatal(err)
	}
	if !Foreign(r, "data/sub/mnt/secret", st.Dev) || !Foreign(r, "data/sub/mnt", st.Dev) || Foreign(r, "data/sub", st.Dev) {
		t.Error("Foreign does not tell the mount's entries from the workspace's")
	}
	gone, err := RemoveAll(r, "data", st.Dev)
	if err != nil || gone {
		t.Fatalf("RemoveAll(data) = %v, %v; want the mount and what is above it kept", gone, err)
	}
	if _, err := os.Stat(filepath.Join(mnt, "secret")); err != nil {
		t.Errorf("the mounted file system lost its file: %v", err)
	}
	if _, err := os.Stat(filepath.Join(ws, "data/other")); !os.IsNotExist(err) {
		t.Errorf("data/other, on the workspace's file system, is still there: %v", err)
	}
	if gone, err := RemoveAll(r, "plain", st.Dev); err != nil || !gone {
		t.Errorf("RemoveAll(plain) = %v, %v", gone, err)
	}
	if gone, err := RemoveAll(r, "missing", st.Dev); err != nil || !gone {
		t.Errorf("RemoveAll(missing) = %v, %v", gone, err)
	}
}
