package docker

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/sandbox/internal/backendkit"
	"github.com/codeagent/codeagent/sandbox/sandboxtest"
)

// TestUnprivilegedCaller runs the backend as a caller that is not root:
// programs still run as Config.HostUID, another uid, yet the caller reads
// back what they wrote (private files and directories, one without any
// permission, a sticky one) with the modes they set (as package wsperm
// masks them), owned by the caller, and Close removes
// every staging directory. Run as root, the test runs itself again as
// nobody with the group of the engine's socket.
func TestUnprivilegedCaller(t *testing.T) {
	engineOrSkip(t)
	if os.Geteuid() == 0 {
		asNobody(t, "TestUnprivilegedCaller")
		return
	}
	b := unprivilegedBackend(t)
	ws := t.TempDir()
	write(t, filepath.Join(ws, "private.txt"), "mine")
	write(t, filepath.Join(ws, "sub/gone.txt"), "gone")
	for p, m := range map[string]fs.FileMode{"private.txt": 0o600, "sub": 0o750} {
		if err := os.Chmod(filepath.Join(ws, p), m); err != nil {
			t.Fatal(err)
		}
	}
	run := func(code string, wall time.Duration) sandbox.Result {
		t.Helper()
		res, err := b.Run(context.Background(), sandbox.Spec{Command: []string{"python3", "-c", code}, Workspace: ws,
			Limits: sandbox.Limits{WallTime: wall}})
		if err != nil {
			t.Fatalf("%v\n%s", err, res.Stderr)
		}
		return res
	}
	res := run(`
import os
open("private.txt", "a").write(" and theirs")
os.remove("sub/gone.txt")
os.mkdir("new", 0o700)
open("new/secret", "w").write("s")
os.chmod("new/secret", 0o600)
os.mkdir("locked")
open("locked/f", "w").write("l")
os.chmod("locked", 0)
os.mkdir("sticky")
os.chmod("sticky", 0o1777)
open("sticky/f", "w").write("t")
print(os.getuid(), os.getgid())
`, 10*time.Second)
	if res.Status != sandbox.StatusOK {
		t.Fatalf("status %s: %s", res.Status, res.Stderr)
	}
	if ids := fmt.Sprint(backendkit.DefaultHostUID, " ", backendkit.DefaultHostUID, "\n"); string(res.Stdout) != ids {
		t.Errorf("the program ran as %q, want %q", res.Stdout, ids)
	}
	if fi, err := os.Lstat(filepath.Join(ws, "locked")); err != nil || fi.Mode() != fs.ModeDir {
		t.Errorf("locked: %v %v, want a directory of mode 0", fi, err)
	}
	// As the program left it, unreadable: opened to be staged again.
	if err := os.Chmod(filepath.Join(ws, "locked"), 0o700); err != nil {
		t.Fatal(err)
	}
	// Killed at its time limit: the container is started again to hand
	// the workspace back.
	res = run(`
import os, time
os.mkdir("late", 0o700)
open("late/f", "w").write("x")
time.sleep(60)
`, time.Second)
	if res.Status != sandbox.StatusTimeout {
		t.Fatalf("status %s, want timeout: %s", res.Status, res.Stderr)
	}
	want := map[string]struct {
		mode    fs.FileMode
		content string
	}{
		"private.txt": {0o600, "mine and theirs"}, "sub": {fs.ModeDir | 0o750, ""},
		"new": {fs.ModeDir | 0o700, ""}, "new/secret": {0o600, "s"},
		"locked/f": {0o644, "l"},
		// 01777 comes back without the sticky bit and without write for
		// group and others (package wsperm).
		"sticky": {fs.ModeDir | 0o755, ""}, "sticky/f": {0o644, "t"},
		"late": {fs.ModeDir | 0o700, ""}, "late/f": {0o644, "x"},
	}
	for p, w := range want {
		fi, err := os.Lstat(filepath.Join(ws, p))
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		if fi.Mode() != w.mode {
			t.Errorf("%s has mode %v, want %v", p, fi.Mode(), w.mode)
		}
		if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != os.Getuid() {
			t.Errorf("%s belongs to uid %d", p, st.Uid)
		}
		if w.content != "" {
			if got, _ := os.ReadFile(filepath.Join(ws, p)); string(got) != w.content {
				t.Errorf("%s = %q, want %q", p, got, w.content)
			}
		}
	}
	if fileExists(filepath.Join(ws, "sub/gone.txt")) {
		t.Errorf("sub/gone.txt was not removed")
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	assertNothingLeft(t, b.pool.id, b.pool.dir)
}

// unprivilegedBackend is the backend of a caller that is not root. On
// cgroup v1, with a runtime that ignores the engine's socket memory limit,
// codeagent cannot set it without root: refused, unless weak isolation is
// accepted, which it then is.
func unprivilegedBackend(t *testing.T) *Backend {
	strict := newTestBackend(t, Config{})
	_, err := strict.Run(context.Background(), sandbox.Spec{Command: []string{"true"}, Workspace: t.TempDir()})
	weak := err != nil
	if err != nil && !errors.Is(err, errNoTCPLimit) {
		t.Fatal(err)
	}
	if err := strict.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("cgroup v1: %v; socket memory limit refused: %v", strict.v1, weak)
	return newTestBackend(t, Config{AllowWeakIsolation: weak})
}

func fileExists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// asNobody runs the test binary's test name as uid 65534 with the group of
// the engine's socket, in a directory of its own, and fails with its
// output when it fails.
func asNobody(t *testing.T, name string) {
	sock := "/var/run/docker.sock"
	if h := os.Getenv("DOCKER_HOST"); h != "" {
		if !strings.HasPrefix(h, "unix://") {
			t.Skipf("DOCKER_HOST %s is not a unix socket", h)
		}
		sock = strings.TrimPrefix(h, "unix://")
	}
	fi, err := os.Stat(sock)
	if err != nil {
		t.Skipf("engine socket: %v", err)
	}
	gid := fi.Sys().(*syscall.Stat_t).Gid
	env := []string{"DOCKER_HOST=unix://" + sock}
	if os.Getenv("CI") != "" {
		env = append(env, "CI=1")
	}
	if img := os.Getenv("CODEAGENT_TEST_IMAGE"); img != "" {
		env = append(env, "CODEAGENT_TEST_IMAGE="+img)
	}
	out, err := sandboxtest.AsUser(t, 65534, int(gid), "^"+name+"$", 10*time.Minute, env...)
	if err != nil || !strings.Contains(string(out), "--- PASS: "+name) {
		t.Fatalf("as nobody: %v\n%s\nthe whole output:\n%s", err, sandboxtest.FailureSummary(out), out)
	}
	t.Logf("as nobody:\n%s", out)
}
