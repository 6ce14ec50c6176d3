//go:build linux && (amd64 || arm64)

package namespace

import (
	"fmt"
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
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// TestConformance runs the suite with sandboxes started on demand and with
// two started ahead, then checks that nothing is left behind.
func TestConformance(t *testing.T) {
	for _, warm := range []int{0, 2} {
		t.Run(fmt.Sprintf("Warm%d", warm), func(t *testing.T) {
			b, err := New(Config{Warm: warm})
			if err != nil {
				t.Fatalf("the namespace backend cannot run on this host (see 'codeagent doctor'): %v", err)
			}
			sandboxtest.RunWith(t, b, sandboxtest.Features{
				RlimitsOnly: b.cgroups == nil, ReactiveDisk: b.ReactiveDisk(), CopyBack: !b.ReactiveDisk()})
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(b.mnt); !os.IsNotExist(err) {
				t.Errorf("Close left %s behind", b.mnt)
			}
			if _, err := os.Stat(filepath.Join(b.etc, completeMark)); err != nil {
				t.Errorf("the shared /etc %s is not whole: %v", b.etc, err)
			}
			if n := b.liveCgroups.Load(); n != 0 {
				t.Errorf("%d cgroups left behind", n)
			}
		})
	}
}
