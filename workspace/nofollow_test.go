package workspace

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/codeagent/codeagent/sandbox"
)

// Links below a directory codeagent resolved are never followed, whoever
// owns them and wherever they point; these are the cases the CLI, server
// and MCP attack tests reach through real programs, one by one.
func TestNoLinkIsFollowedBelowADirectory(t *testing.T) {
	w := newWS(t)
	host := t.TempDir()
	write(t, filepath.Join(host, "secret"), "host")
	write(t, filepath.Join(w.Dir, "sub", "plot.png"), "png")
	write(t, filepath.Join(w.Dir, "real", "secret"), "ws")
	os.Symlink(host, filepath.Join(w.Dir, "hostlink"))
	os.Symlink("real", filepath.Join(w.Dir, "inner")) // stays inside the workspace

	for _, rel := range []string{"hostlink/secret", "inner/secret"} {
		if f, _, err := w.OpenRegular(rel); !errors.Is(err, sandbox.ErrSymlinkInPath) {
			if f != nil {
				f.Close()
			}
			t.Errorf("OpenRegular(%s): %v, want a symlink error", rel, err)
		}
	}
	if _, err := MkdirBeneath(w.Dir, "hostlink/new", 0o755); !errors.Is(err, sandbox.ErrSymlinkInPath) {
		t.Errorf("MkdirBeneath through a link: %v", err)
	}
	if _, err := NewBeneath(w.Dir, "inner"); !errors.Is(err, sandbox.ErrSymlinkInPath) {
		t.Errorf("NewBeneath on a link: %v", err)
	}

	// An artifact whose directory in the output directory is a link.
	dst := t.TempDir()
	os.Symlink(host, filepath.Join(dst, "sub"))
	if _, err := w.CopyOut([]Artifact{{Path: "sub/plot.png"}}, dst, 0); !errors.Is(err, sandbox.ErrSymlinkInPath) {
		t.Errorf("CopyOut through a link in the destination: %v", err)
	}
	if _, err := os.Stat(filepath.Join(host, "plot.png")); err == nil {
		t.Error("the artifact landed in the host directory")
	}
	// The output directory itself, given through a link.
	if _, err := w.CopyOut([]Artifact{{Path: "sub/plot.png"}}, filepath.Join(w.Dir, "hostlink"), 0); !errors.Is(err, sandbox.ErrSymlinkInPath) {
		t.Errorf("CopyOut to a linked directory: %v", err)
	}
	if _, err := os.Stat(filepath.Join(host, "sub")); err == nil {
		t.Error("the artifact landed in the host directory")
	}
}

func TestCopyOutIntoTheWorkspaceItselfKeepsTheFiles(t *testing.T) {
	w := newWS(t)
	write(t, filepath.Join(w.Dir, "out", "plot.png"), "png")
	copied, err := w.CopyOut([]Artifact{{Path: "out/plot.png"}}, w.Dir, 0)
	if err != nil || len(copied) != 1 {
		t.Fatalf("CopyOut = %v, %v", copied, err)
	}
	if b, _ := os.ReadFile(filepath.Join(w.Dir, "out", "plot.png")); string(b) != "png" {
		t.Fatalf("plot.png = %q: truncated by copying onto itself", b)
	}
}

func TestMkdirAllCreatesBelowTheResolvedPart(t *testing.T) {
	base := t.TempDir()
	got, err := MkdirAll(filepath.Join(base, "a", "b", "c"), 0o755)
	if err != nil || got != filepath.Join(base, "a", "b", "c") {
		t.Fatalf("MkdirAll = %q, %v", got, err)
	}
	if fi, err := os.Stat(got); err != nil || !fi.IsDir() {
		t.Fatalf("not created: %v", err)
	}
	write(t, filepath.Join(base, "file"), "x")
	if _, err := MkdirAll(filepath.Join(base, "file", "x"), 0o755); err == nil {
		t.Error("MkdirAll below a file succeeded")
	}
	if err := CheckDir(filepath.Join(base, "missing", "dir")); err != nil {
		t.Errorf("CheckDir of a missing directory: %v", err)
	}
	if _, err := os.Stat(filepath.Join(base, "missing")); err == nil {
		t.Error("CheckDir created a directory")
	}
}
