package docker

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/codeagent/codeagent/procid"
)

// TestSweepsDeadOwnersStateDirs: a state directory whose owner died
// without closing its pool, and whose containers are gone already (so the
// container sweep cannot find it), is removed by the next backend's start,
// with the file system mounted in it unmounted; a live owner's directory
// and one without an owner file stay.
func TestSweepsDeadOwnersStateDirs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounts a file system")
	}
	engineOrSkip(t)
	stateDir := t.TempDir()
	dead := procid.Self()
	dead.Start = "1" // this pid, but another start: a process that ended
	mk := func(name, owner string) string {
		d := filepath.Join(stateDir, statePrefix+name)
		if err := os.MkdirAll(filepath.Join(d, "box-1", "fs"), 0o700); err != nil {
			t.Fatal(err)
		}
		if owner != "" {
			if err := os.WriteFile(filepath.Join(d, ownerFile), []byte(owner), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return d
	}
	deadDir := mk("dead-1", dead.String())
	liveDir := mk("live-1", procid.Self().String())
	legacyDir := mk("legacy-1", "")
	fs := filepath.Join(deadDir, "box-1", "fs")
	if err := unix.Mount("tmpfs", fs, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(fs, unix.MNT_DETACH) })
	b := newTestBackend(t, Config{StateDir: stateDir})
	defer b.Close()
	if _, err := os.Lstat(deadDir); !os.IsNotExist(err) {
		t.Errorf("the dead owner's state directory is still there (%v)", err)
	}
	if mounts, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(mounts), fs) {
		t.Errorf("%s is still mounted", fs)
	}
	for _, d := range []string{liveDir, legacyDir} {
		if _, err := os.Lstat(d); err != nil {
			t.Errorf("%s was removed: %v", d, err)
		}
	}
}
