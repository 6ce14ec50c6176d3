package store

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// withUmask sets the process's umask for the test (the usual 022 lets
// SQLite make files readable by every user).
func withUmask(t *testing.T, mask int) {
	old := syscall.Umask(mask)
	t.Cleanup(func() { syscall.Umask(old) })
}

// openDir makes dir with mode 0755, as a user's `mkdir` does.
func openDir(t *testing.T) string {
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// writeSome writes a session and an audit record, so that the WAL and its
// index exist while s is open.
func writeSome(t *testing.T, s *Store) {
	ctx := context.Background()
	if _, err := s.CreateSession(ctx, "secret", "/tmp/ws"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Audit(ctx, "secret", "turn", "executed", "a task the user keeps to themself"); err != nil {
		t.Fatal(err)
	}
}

// assertPrivate checks that dir is 0700 and that every file in it, the
// database, -wal, -shm and the reserve among them, is 0600.
func assertPrivate(t *testing.T, dir string) {
	t.Helper()
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if m := fi.Mode().Perm(); m != 0o700 {
		t.Errorf("the store's directory is %04o, want 0700", m)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		seen[e.Name()] = true
		if m := info.Mode(); m != 0o600 {
			t.Errorf("%s is %v, want -rw-------", e.Name(), m)
		}
	}
	for _, name := range []string{"codeagent.db", "codeagent.db-wal", "codeagent.db-shm", "codeagent.db.reserve"} {
		if !seen[name] {
			t.Errorf("%s is missing (the directory holds %v)", name, seen)
		}
	}
}

// TestStoreFilesArePrivate: a store opened in an empty directory of mode
// 0755 under umask 022 leaves nothing another local user can read.
func TestStoreFilesArePrivate(t *testing.T) {
	withUmask(t, 0o022)
	dir := openDir(t)
	s, err := Open(context.Background(), filepath.Join(dir, "codeagent.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	writeSome(t, s)
	assertPrivate(t, dir)
}

// TestStoreTightensOldFiles: the files of a store made by an earlier
// codeagent, 0644 in a 0755 directory, are made private at the next open,
// also while another process holds the store open.
func TestStoreTightensOldFiles(t *testing.T) {
	withUmask(t, 0o022)
	dir := openDir(t)
	path := filepath.Join(dir, "codeagent.db")
	old, err := Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	writeSome(t, old)
	for _, p := range []string{path, path + "-wal", path + "-shm", path + ".reserve", dir} {
		if err := os.Chmod(p, 0o644|fs.FileMode(map[bool]uint32{true: 0o111}[p == dir])); err != nil {
			t.Fatal(err)
		}
	}
	s, err := Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	assertPrivate(t, dir)
}

// TestStoreRefusesForeignOpenDir: a directory open to others that holds
// other files is someone's choice: the store refuses it and changes no
// mode; a link where the database belongs is refused too.
func TestStoreRefusesForeignOpenDir(t *testing.T) {
	dir := openDir(t)
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Open(context.Background(), filepath.Join(dir, "codeagent.db"))
	var open *DirOpenError
	if !errors.As(err, &open) || !strings.Contains(err.Error(), "chmod 700 "+dir) {
		t.Fatalf("Open in a shared directory: %v, want a DirOpenError saying what to do", err)
	}
	if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o755 {
		t.Errorf("the refused directory's mode changed to %v", fi.Mode())
	}
	if _, err := os.Lstat(filepath.Join(dir, "codeagent.db")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a refused Open made the database: %v", err)
	}

	priv := t.TempDir()
	if err := os.Chmod(priv, 0o700); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(t.TempDir(), "elsewhere.db")
	if err := os.Symlink(target, filepath.Join(priv, "codeagent.db")); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(context.Background(), filepath.Join(priv, "codeagent.db")); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("Open through a link: %v, want a refusal", err)
	}
	if _, err := os.Lstat(target); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Open followed the link: %v", err)
	}
}
