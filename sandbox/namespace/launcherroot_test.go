//go:build linux && (amd64 || arm64)

package namespace

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/codeagent/codeagent/sandbox"
)

// TestLauncherSeesFewMounts: a launcher started as root sees, in its
// mount namespace, only the trees bwrap binds from, not the host's other
// mounts (here a tmpfs the test mounts on the host first), so that bwrap's
// rereading of the mount table after each bind does not grow with them.
// And a sandbox still runs.
func TestLauncherSeesFewMounts(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the launcher has a namespace of its own only as root")
	}
	hostMount := t.TempDir()
	if err := unix.Mount("tmpfs", hostMount, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	defer unix.Unmount(hostMount, unix.MNT_DETACH)
	b := newTestBackend(t)
	spec := sandbox.Spec{Command: []string{"true"}}
	l, err := b.newLauncher(spec)
	if err != nil {
		t.Fatal(err)
	}
	defer l.discard()
	data, err := os.ReadFile("/proc/" + strconv.Itoa(l.cmd.Process.Pid) + "/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	host, _ := os.ReadFile("/proc/self/mountinfo")
	t.Logf("launcher: %d mounts; host: %d", len(lines), strings.Count(string(host), "\n"))
	if strings.Contains(string(data), hostMount) {
		t.Errorf("the launcher sees the host's mount at %s:\n%s", hostMount, data)
	}
	if max := len(b.rootSources()) + 4; len(lines) > max {
		t.Errorf("the launcher sees %d mounts, want at most %d:\n%s", len(lines), max, data)
	}
	for _, want := range []string{" / ", " /usr ", " /proc ", " /dev ", " " + b.mnt + " "} {
		if !strings.Contains(string(data), want) {
			t.Errorf("no mount at %q in the launcher's namespace:\n%s", strings.TrimSpace(want), data)
		}
	}
	ws := t.TempDir()
	res, err := b.Run(t.Context(), sandbox.Spec{Command: []string{"python3", "-c", "print('ok')"}, Workspace: ws})
	if err != nil || res.Status != sandbox.StatusOK || strings.TrimSpace(string(res.Stdout)) != "ok" {
		t.Fatalf("run: %v %s %q %q", err, res.Status, res.Stdout, res.Stderr)
	}
}
