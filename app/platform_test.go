package app

import (
	"os"
	"path/filepath"
	"testing"
)

// TestPlatformFollowsTheHostPython: the namespace backend's environments
// are keyed by the host's Python version (python3 -> python3.11), so an
// upgrade to python3.12 makes new ones instead of reusing packages built
// for 3.11; an image's backend is keyed by the backend alone.
func TestPlatformFollowsTheHostPython(t *testing.T) {
	dir := t.TempDir()
	link := filepath.Join(dir, "python3")
	for _, v := range []string{"python3.11", "python3.12"} {
		if err := os.WriteFile(filepath.Join(dir, v), nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("python3.11", link); err != nil {
		t.Fatal(err)
	}
	before := platform("namespace", link)
	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("python3.12", link); err != nil {
		t.Fatal(err)
	}
	after := platform("namespace", link)
	if before == after || filepath.Base(before) != "python3.11" || filepath.Base(after) != "python3.12" {
		t.Errorf("platforms %q and %q", before, after)
	}
	if p := platform("docker", link); filepath.Base(p) == "python3.12" {
		t.Errorf("docker's platform names the host's Python: %q", p)
	}
}
