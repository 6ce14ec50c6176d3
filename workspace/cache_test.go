package workspace

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/codeagent/codeagent/lang"
)

// TestCacheDirIsHidden: a workspace's build cache (lang.CacheDir) is kept
// only in codeagent's own workspaces, and it and codeagent's own directory
// (lang.OwnDir) are in no snapshot or listing.
func TestCacheDirIsHidden(t *testing.T) {
	w, err := NewTemp(t.TempDir(), "ws-")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if !w.KeepsCache() {
		t.Error("a temporary workspace keeps no cache")
	}
	if user, err := New(t.TempDir()); err != nil || user.KeepsCache() {
		t.Errorf("a directory of the user's keeps a cache (%v)", err)
	}
	for _, rel := range []string{lang.CacheDir + "/go-build/00/x-a", lang.OwnDir + "/solution.py", "out.txt", "sub/" + lang.CacheDir + "/y"} {
		p := filepath.Join(w.Dir, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	snap, err := w.Snapshot(Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Files) != 2 || snap.Files["out.txt"].Size != 1 || snap.Files["sub/"+lang.CacheDir+"/y"].Size != 1 {
		t.Errorf("snapshot %v, want out.txt and sub/%s/y (only the top-level cache and own directory are hidden)", snap.Files, lang.CacheDir)
	}
	if d := w.Describe(nil); d != "- out.txt (1 bytes)\n- sub/"+lang.CacheDir+"/y (1 bytes)\n" {
		t.Errorf("Describe = %q", d)
	}
}
