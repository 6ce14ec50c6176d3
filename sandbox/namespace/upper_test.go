//go:build linux && (amd64 || arm64)

package namespace

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/codeagent/codeagent/procid"
	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/sandbox/internal/stagingfs"
)

// crashEnv makes TestCrashLeavesNothing's helper run in a child process.
const crashEnv = "CODEAGENT_TEST_CRASH_HELPER"

// TestCrashLeavesNothing kills a process holding warm sandboxes with their
// upper file systems, one of them in the middle of a run, and checks that
// their loop devices detach by themselves (the images were removed as the
// devices took them, and the mounts lived only in the launchers' mount
// namespaces); and that New sweeps an image a crash left between its
// creation and its removal.
func TestCrashLeavesNothing(t *testing.T) {
	if os.Getenv(crashEnv) != "" {
		crashHelper(t)
		return
	}
	overlayBackend(t) // skips without overlays
	cmd := exec.Command(os.Args[0], "-test.run", "^TestCrashLeavesNothing$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), crashEnv+"=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	sc := bufio.NewScanner(out)
	ready := false
	for sc.Scan() {
		if strings.Contains(sc.Text(), "CRASH-READY") {
			ready = true
			break
		}
	}
	if !ready {
		t.Fatal("the helper did not get ready")
	}
	child := procid.Owner{PID: cmd.Process.Pid, Start: procid.StartTime(cmd.Process.Pid), Boot: procid.BootID()}
	if n := len(loopsOf(child)); n < 2 {
		t.Fatalf("the helper holds %d upper file systems, want 2 (one warm, one running): %s", n, sc.Text())
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for len(loopsOf(child)) > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if left := loopsOf(child); len(left) > 0 {
		t.Errorf("loop devices left attached after the crash: %v", left)
	}

	// An image of a process that is gone: what a crash leaves between
	// mke2fs and the loop device.
	b := newTestBackend(t)
	stale := filepath.Join(b.scratch, stagingfs.ImagePrefix+child.Tag()+"-1.img")
	if err := os.WriteFile(stale, []byte("left"), 0o600); err != nil {
		t.Fatal(err)
	}
	b2 := newTestBackend(t)
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("New left %s of a dead process: %v", stale, err)
	}
	if b2.ReactiveDisk() {
		t.Error("the second backend has no overlays")
	}
}

// crashHelper fills a warm pool, starts a run that writes and waits, and
// waits to be killed.
func crashHelper(t *testing.T) {
	b, err := New(Config{Warm: 2})
	if err != nil {
		t.Fatal(err)
	}
	// One command (warm launchers are kept per command); the second run
	// writes and waits.
	cmd := []string{"sh", "-c", `test -n "$W" || exit 0; head -c 1000000 /dev/urandom > f; sleep 60`}
	ws := t.TempDir()
	if res, err := b.Run(context.Background(), sandbox.Spec{Command: cmd, Workspace: ws}); err != nil || res.Status != sandbox.StatusOK {
		t.Fatalf("run: %v %s", err, res.Status)
	}
	b.quiesce()
	ws = t.TempDir()
	go func() {
		res, err := b.Run(context.Background(), sandbox.Spec{Command: cmd, Workspace: ws, Env: map[string]string{"W": "1"}})
		t.Logf("the run ended: %v %s %s", err, res.Status, res.Message)
	}()
	deadline := time.Now().Add(20 * time.Second)
	for len(loopsOf(procid.Self())) < 2 && time.Now().Before(deadline) { // one warm, one running
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond) // the run's program is writing
	os.Stdout.WriteString("CRASH-READY " + strings.Join(loopsOf(procid.Self()), " ") + "\n")
	time.Sleep(time.Minute)
}

// loopsOf lists the loop devices whose image process o made.
func loopsOf(o procid.Owner) []string {
	prefix := stagingfs.ImagePrefix + o.Tag() + "-"
	var out []string
	devs, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	for _, d := range devs {
		b, err := os.ReadFile(d)
		if err == nil && strings.HasPrefix(filepath.Base(strings.TrimSpace(string(b))), prefix) {
			out = append(out, strings.Split(d, "/")[3])
		}
	}
	return out
}
