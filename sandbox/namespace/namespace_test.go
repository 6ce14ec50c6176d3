//go:build linux && (amd64 || arm64)

package namespace

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/codeagent/codeagent/sandbox/sandboxtest"
)

func newTestBackend(t testing.TB) *Backend {
	t.Helper()
	b, err := New(Config{})
	if err != nil {
		t.Fatalf("the namespace backend cannot run on this host (see 'codeagent doctor'): %v", err)
	}
	return b
}

func TestConformance(t *testing.T) {
	b := newTestBackend(t)
	before := runCgroups(t)
	sandboxtest.Run(t, b)
	for dir := range runCgroups(t) {
		if !before[dir] {
			t.Errorf("cgroup left behind: %s", dir)
		}
	}
}

// runCgroups lists the run cgroups that exist now.
func runCgroups(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	mounts, err := cgroupMounts()
	if err != nil {
		t.Fatal(err)
	}
	self, _ := selfCgroups()
	for _, m := range mounts {
		own := self[""]
		for c, p := range self {
			if c != "" && filepath.Base(m.point) == c {
				own = p
			}
		}
		for _, base := range []string{hostPath(m, own), filepath.Dir(hostPath(m, own))} {
			entries, _ := os.ReadDir(filepath.Join(base, cgroupParentName))
			for _, e := range entries {
				if e.IsDir() {
					out[filepath.Join(base, cgroupParentName, e.Name())] = true
				}
			}
		}
	}
	return out
}
