package docker

import (
	"os"
	"path/filepath"
	"testing"
)

func write(t *testing.T, p, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestStageRoundTrip stages a workspace, changes the staged copy as a
// program would, and checks what comes back, without a Docker engine.
func TestStageRoundTrip(t *testing.T) {
	ws, st, outside := t.TempDir(), filepath.Join(t.TempDir(), "ws"), t.TempDir()
	if err := os.Mkdir(st, 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(ws, "keep.txt"), "keep")
	write(t, filepath.Join(ws, "change.txt"), "old")
	write(t, filepath.Join(ws, "gone/a.txt"), "a")
	write(t, filepath.Join(outside, "secret"), "secret")
	if err := os.Symlink(outside, filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	snap, err := stageIn(ws, st, -1)
	if err != nil {
		t.Fatal(err)
	}
	// The program: changes a file, adds one, removes a directory, replaces
	// the link by a directory and plants a link to a host file.
	write(t, filepath.Join(st, "change.txt"), "new")
	write(t, filepath.Join(st, "sub/new.txt"), "new file")
	if err := os.RemoveAll(filepath.Join(st, "gone")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(st, "link")); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(st, "link/secret"), "owned")
	if err := os.Symlink("/etc/passwd", filepath.Join(st, "passwd")); err != nil {
		t.Fatal(err)
	}
	if err := stageOut(st, ws, snap, nil); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]string{"keep.txt": "keep", "change.txt": "new", "sub/new.txt": "new file", "link/secret": "owned"} {
		if got, err := os.ReadFile(filepath.Join(ws, p)); err != nil || string(got) != want {
			t.Errorf("%s = %q, %v; want %q", p, got, err, want)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(outside, "secret")); string(got) != "secret" {
		t.Errorf("a host file outside the workspace was written through a link: %q", got)
	}
	if _, err := os.Stat(filepath.Join(ws, "gone")); !os.IsNotExist(err) {
		t.Errorf("removed directory still in the workspace: %v", err)
	}
	if l, err := os.Readlink(filepath.Join(ws, "passwd")); err != nil || l != "/etc/passwd" {
		t.Errorf("link not copied as a link: %q %v", l, err)
	}
}
