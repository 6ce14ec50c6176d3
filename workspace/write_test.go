package workspace

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/codeagent/codeagent/sandbox"
)

func TestWriteRelStaysInsideAndFollowsNoLink(t *testing.T) {
	w := newWS(t)
	outside := filepath.Join(t.TempDir(), "outside")
	os.Mkdir(outside, 0o755)
	host := filepath.Join(outside, "host.txt")
	write(t, host, "host")
	if err := w.WriteRel("data/in.csv", []byte("a,b\n")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(w.Dir, "data", "in.csv")); string(b) != "a,b\n" {
		t.Errorf("data/in.csv = %q", b)
	}
	// A link as the file is replaced, not written through.
	os.Symlink(host, filepath.Join(w.Dir, "link.txt"))
	if err := w.WriteRel("link.txt", []byte("mine")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(host); string(b) != "host" {
		t.Errorf("the host file was written through the link: %q", b)
	}
	if fi, _ := os.Lstat(filepath.Join(w.Dir, "link.txt")); !fi.Mode().IsRegular() {
		t.Errorf("link.txt is %v", fi.Mode())
	}
	// A link as a directory is refused.
	os.Symlink(outside, filepath.Join(w.Dir, "out"))
	if err := w.WriteRel("out/x.txt", []byte("x")); !errors.Is(err, sandbox.ErrSymlinkInPath) {
		t.Errorf("through a linked directory: %v", err)
	}
	if _, err := os.Stat(filepath.Join(outside, "x.txt")); err == nil {
		t.Error("a file was created outside the workspace")
	}
	os.Mkdir(filepath.Join(w.Dir, "dir"), 0o755)
	for _, bad := range []string{"../x", "/etc/x", "a/../../x", ".hidden", "", "dir"} {
		if err := w.WriteRel(bad, []byte("x")); err == nil {
			t.Errorf("WriteRel(%q) succeeded", bad)
		}
	}
}
