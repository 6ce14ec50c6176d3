package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func noEnv(string) string { return "" }

// sharedDir makes a directory of mode 0755 (t.TempDir's own may differ).
func sharedDir(t *testing.T, parent string) string {
	t.Helper()
	dir := filepath.Join(parent, "data")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func modeOf(t *testing.T, p string) os.FileMode {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

// TestDataDirMadePrivate: a data directory codeagent makes is 0700, and an
// existing one open to others that is codeagent's own (empty, or holding
// its store) is made 0700 before the store is opened in it.
func TestDataDirMadePrivate(t *testing.T) {
	made, err := resolveDataDir(filepath.Join(t.TempDir(), "new", "data"), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if m := modeOf(t, made); m != 0o700 {
		t.Errorf("a new data directory is %04o, want 0700", m)
	}

	empty := sharedDir(t, t.TempDir())
	if got, err := resolveDataDir(empty, noEnv); err != nil || got != empty {
		t.Fatalf("an empty 0755 directory: %q, %v", got, err)
	}
	if m := modeOf(t, empty); m != 0o700 {
		t.Errorf("an empty 0755 data directory is %04o after resolveDataDir, want 0700", m)
	}

	// A store left open to others by an earlier codeagent.
	old := sharedDir(t, t.TempDir())
	if err := os.WriteFile(filepath.Join(old, "codeagent.db"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(old, "sessions"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := resolveDataDir(old, noEnv); err != nil {
		t.Fatalf("a 0755 directory holding codeagent.db: %v", err)
	}
	if m := modeOf(t, old); m != 0o700 {
		t.Errorf("a 0755 data directory holding codeagent.db is %04o after resolveDataDir, want 0700", m)
	}
	if m := modeOf(t, filepath.Join(old, "sessions")); m != 0o755 {
		t.Errorf("sessions/, not the data directory, changed to %04o", m)
	}
	st, err := openStore(context.Background(), old)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	if m := modeOf(t, filepath.Join(old, "codeagent.db")); m != 0o600 {
		t.Errorf("codeagent.db is %04o after the store opened, want 0600", m)
	}
}

// TestDataDirOpenAndNotCodeagentsIsRefused: a 0755 directory holding
// someone else's files (or, as root, another user's directory) is not
// codeagent's to change: refused with what to do, its mode left as it is.
func TestDataDirOpenAndNotCodeagentsIsRefused(t *testing.T) {
	dir := sharedDir(t, t.TempDir())
	notes := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(notes, []byte("someone's notes"), 0o644); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		if err := os.Chown(notes, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	refused := func(dir, why string) {
		t.Helper()
		_, err := resolveDataDir(dir, noEnv)
		var ue usageError
		if !errors.As(err, &ue) {
			t.Fatalf("%s: %v, want a usage error", dir, err)
		}
		for _, want := range []string{dir, "open to other users (mode 0755)", why, "chmod 700 " + dir, "another directory with --data-dir"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("the refusal %q does not say %q", err, want)
			}
		}
		if m := modeOf(t, dir); m != 0o755 {
			t.Errorf("the refused directory is now %04o", m)
		}
	}
	refused(dir, "holds files but no codeagent.db")
	if _, err := os.Lstat(filepath.Join(dir, "codeagent.db")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a store was made in the refused directory: %v", err)
	}
	if os.Geteuid() != 0 {
		return
	}
	theirs := sharedDir(t, t.TempDir())
	if err := os.Chown(theirs, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	refused(theirs, "belongs to uid 65534")
}

// TestStoreUnreadableByOtherUser attacks from another local user: after
// codeagent opened its store in a 0755 data directory, uid 65534 cannot
// read the database, its WAL or its index; not through the directory and,
// were the directory opened again by hand, not by the files' own modes.
func TestStoreUnreadableByOtherUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("running a process as another user needs root")
	}
	parent, err := os.MkdirTemp("", "codeagent-datadir-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(parent) })
	if err := os.Chmod(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	data := sharedDir(t, parent)
	ctx := context.Background()
	st, dir, err := openDataStore(ctx, data)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.CreateSession(ctx, "private", filepath.Join(dir, "sessions", "private")); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Audit(ctx, "private", "turn", "executed", "the user's task and its output"); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "codeagent.db")
	files := []string{db, db + "-wal", db + "-shm"}
	// readAs reports, for each path, whether uid 65534 could open it for
	// reading.
	readAs := func(paths ...string) map[string]string {
		out := map[string]string{}
		for _, p := range paths {
			cmd := exec.Command("head", "-c", "1", p)
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}}
			b, err := cmd.CombinedOutput()
			if err == nil {
				out[p] = "read"
			} else {
				out[p] = strings.TrimSpace(string(b))
			}
		}
		return out
	}
	check := func(how string) {
		t.Helper()
		for p, got := range readAs(files...) {
			if !strings.Contains(got, "Permission denied") {
				t.Errorf("%s: uid 65534 opening %s: %q, want permission denied", how, filepath.Base(p), got)
			}
		}
	}
	check("the data directory as codeagent left it")

	// The files alone: open the directory again, as an administrator
	// might, and check that uid 65534 reaches it (a file it may read).
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	control := filepath.Join(dir, "readme.txt")
	if err := os.WriteFile(control, []byte("public"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := readAs(control)[control]; got != "read" {
		t.Fatalf("uid 65534 cannot read a 0644 file in the 0755 data directory (%q): the check would prove nothing", got)
	}
	check("the store's files in a directory opened again")
}
