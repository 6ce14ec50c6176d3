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
	a, err := sharedEtc(base, hostTrustSource())
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
	b, err := sharedEtc(base, hostTrustSource())
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
	c, err := sharedEtc(base, hostTrustSource())
	if err != nil || c == a {
		t.Fatalf("after a change: %q %v, want a new directory", c, err)
	}
	if got, _ := os.ReadFile(filepath.Join(c, "hostname")); string(got) != "changed\n" {
		t.Fatalf("hostname %q", got)
	}
}

// TestFingerprintFollowsChanges: the walk behind the fingerprint changes
// when a link is pointed elsewhere, a file is edited in place or an entry
// is added, and not otherwise.
func TestFingerprintFollowsChanges(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "alternatives"), 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "alternatives", "python")
	file := filepath.Join(dir, "alternatives", "conf")
	if err := os.Symlink("/usr/bin/python3.11", link); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte("a"), 0o644); err != nil {
		t.Fatal(err)
	}
	sum := func() string {
		buf, err := appendTree(nil, dir)
		if err != nil {
			t.Fatal(err)
		}
		return string(buf)
	}
	before := sum()
	if sum() != before {
		t.Fatal("the same tree gave two fingerprints")
	}
	steps := []struct {
		name string
		do   func() error
	}{
		{"link replaced", func() error {
			_ = os.Remove(link)
			return os.Symlink("/usr/bin/python3.12", link)
		}},
		{"link renamed over (update-alternatives)", func() error {
			tmp := link + ".tmp"
			if err := os.Symlink("/usr/bin/python3.13", tmp); err != nil {
				return err
			}
			return os.Rename(tmp, link)
		}},
		{"file edited in place", func() error {
			f, err := os.OpenFile(file, os.O_WRONLY, 0)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = f.WriteAt([]byte("b"), 0) // same size
			return err
		}},
		{"entry added", func() error { return os.WriteFile(filepath.Join(dir, "alternatives", "new"), nil, 0o644) }},
	}
	for _, s := range steps {
		prev := sum()
		time.Sleep(10 * time.Millisecond) // a distinct change time
		if err := s.do(); err != nil {
			t.Fatal(err)
		}
		if sum() == prev {
			t.Errorf("%s: the fingerprint did not change", s.name)
		}
	}
}

// BenchmarkEtcFingerprint is what every start pays to find the prepared /etc.
func BenchmarkEtcFingerprint(b *testing.B) {
	for b.Loop() {
		if _, err := etcFingerprint(hostTrustSource()); err != nil {
			b.Fatal(err)
		}
	}
}
