//go:build linux && (amd64 || arm64)

package namespace

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestSharedEtcIsBuiltOnceAndFollowsTheHost: a second start reuses the
// prepared /etc; a change of what it is made of gives another one.
func TestSharedEtcIsBuiltOnceAndFollowsTheHost(t *testing.T) {
	base := t.TempDir()
	start := time.Now()
	a, err := sharedEtc(base)
	if err != nil {
		t.Fatal(err)
	}
	built := time.Since(start)
	ino := func(p string) uint64 {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Sys().(*syscall.Stat_t).Ino
	}
	first := ino(filepath.Join(a, "passwd"))
	start = time.Now()
	b, err := sharedEtc(base)
	if err != nil || b != a {
		t.Fatalf("second start: %q %v, want %q", b, err, a)
	}
	t.Logf("built in %v, found again in %v", built, time.Since(start))
	if ino(filepath.Join(b, "passwd")) != first {
		t.Fatal("the prepared /etc was rebuilt")
	}
	old := etcSynthesized["hostname"]
	etcSynthesized["hostname"] = "changed\n"
	defer func() { etcSynthesized["hostname"] = old }()
	c, err := sharedEtc(base)
	if err != nil || c == a {
		t.Fatalf("after a change: %q %v, want a new directory", c, err)
	}
	if got, _ := os.ReadFile(filepath.Join(c, "hostname")); string(got) != "changed\n" {
		t.Fatalf("hostname %q", got)
	}
}
