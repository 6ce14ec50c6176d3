//go:build linux && (amd64 || arm64)

package namespace

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/codeagent/codeagent/internal/proctest"
	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/sandbox/internal/backendkit"
)

// The tests of this file play a server that dies (kill -9) while it holds
// sandboxes started ahead: a child process (the test binary again, with
// deathEnv naming what it does) runs a backend whose programs run as host
// uids of their own (deathUID), so that every process it leaves, whoever
// its parent is by then, is found by its uid.
const (
	deathEnv    = "CODEAGENT_TEST_DEATH_HELPER"
	deathDirEnv = "CODEAGENT_TEST_DEATH_DIR" // the helper's workspaces, the parent's to remove
	deathUID    = 3_000_000_000
)

// TestDeathDuringHandshakeEndsTheSandbox kills the helper while bwrap has
// forked the sandbox's first process and waits for the backend to write
// its id maps: bwrap's launcher dies with the backend, and a first process
// it forked waits for the launcher's word forever unless the kernel ends
// it too. This is the path that once left a bwrap process re-parented to
// init with no child. A warm interpreter and a cold run, each.
func TestDeathDuringHandshakeEndsTheSandbox(t *testing.T) {
	if os.Getenv(deathEnv) != "" {
		deathHelper(t)
		return
	}
	for _, mode := range []string{"cold", "warm"} {
		t.Run(mode, func(t *testing.T) {
			if mode == "warm" {
				newWarmBackend(t, 1) // skips without warm interpreters
			} else {
				rootBackend(t)
			}
			killHelperAt(t, "handshake-"+mode, "IN-HANDSHAKE", 0)
		})
	}
}

// TestDeathAtRandomMomentsEndsEverything kills the helper at random
// moments while it fills its pools of warm sandboxes and interpreters,
// hands them out to executions and refills them, and checks each time
// that nothing of it is left a second later.
func TestDeathAtRandomMomentsEndsEverything(t *testing.T) {
	if os.Getenv(deathEnv) != "" {
		deathHelper(t)
		return
	}
	newWarmBackend(t, 1)
	const rounds = 6
	for i := range rounds {
		after := time.Duration(rand.Int64N(int64(2500 * time.Millisecond)))
		t.Run(fmt.Sprintf("%d-after-%dms", i, after.Milliseconds()), func(t *testing.T) {
			killHelperAt(t, "load", "LOADING", after)
		})
	}
}

// rootBackend skips unless the backend runs as root, where sandboxes have
// host uids of their own.
func rootBackend(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: unprivileged, sandboxes run as the caller's uid")
	}
	if err := backendkit.CheckHostUIDRange(deathUID, backendkit.HostUIDCount); err != nil {
		t.Skip(err)
	}
}

// killHelperAt starts the helper doing mode, waits for it to print mark,
// waits after, kills it with SIGKILL and checks that within a second no
// process runs as one of its sandboxes' uids.
func killHelperAt(t *testing.T, mode, mark string, after time.Duration) {
	t.Helper()
	rootBackend(t)
	cmd := exec.Command(os.Args[0], "-test.run", "^"+t.Name()[:strings.IndexByte(t.Name(), '/')]+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), deathEnv+"="+mode, deathDirEnv+"="+t.TempDir())
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	marked := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.Contains(sc.Text(), mark) {
				marked <- true
				for sc.Scan() { // keep the pipe drained
				}
				return
			}
		}
		marked <- false
	}()
	select {
	case ok := <-marked:
		if !ok {
			t.Fatal("the helper ended before " + mark)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the helper did not print " + mark + " within a minute")
	}
	time.Sleep(after)
	seen := len(proctest.Live(deathUID, backendkit.HostUIDCount))
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	killed := time.Now()
	var left []proctest.Process
	for time.Since(killed) < time.Second {
		if left = proctest.Live(deathUID, backendkit.HostUIDCount); len(left) == 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(left) > 0 {
		var lines []string
		for _, p := range left { // bounded clean-up of what the test found, then the verdict
			lines = append(lines, p.String())
			_ = syscall.Kill(p.PID, syscall.SIGKILL)
		}
		t.Fatalf("a second after the backend's death, %d process(es) of its sandboxes still run (of %d before):\n%s",
			len(left), seen, strings.Join(lines, "\n"))
	}
	t.Logf("%d sandbox process(es) before the kill, none a second after", seen)
}

// deathHelper is the child process: a backend doing what deathEnv says,
// until it is killed.
func deathHelper(t *testing.T) {
	mode := os.Getenv(deathEnv)
	cfg := Config{HostUID: deathUID}
	switch mode {
	case "handshake-warm":
		cfg.WarmPython = 1
	case "load":
		cfg.Warm, cfg.WarmPython = 2, 1
	}
	if strings.HasPrefix(mode, "handshake-") {
		var once sync.Once
		afterFork = func() {
			once.Do(func() {
				os.Stdout.WriteString("IN-HANDSHAKE\n")
				time.Sleep(time.Minute)
			})
		}
	}
	b, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dir := os.Getenv(deathDirEnv)
	switch mode {
	case "handshake-cold":
		_, _ = b.Run(context.Background(), sandbox.Spec{Command: []string{"true"}, Workspace: dir})
	case "handshake-warm":
		b.warm.Fill()
	case "load":
		os.Stdout.WriteString("LOADING\n")
		var wg sync.WaitGroup
		for w := range 2 {
			wg.Go(func() {
				code := []string{"print(1)", "import pandas\nprint(pandas.__name__)"}[w]
				ws := filepath.Join(dir, strconv.Itoa(w))
				_ = os.Mkdir(ws, 0o755)
				_ = os.WriteFile(filepath.Join(ws, "main.py"), []byte(code), 0o644)
				for {
					_, _ = b.Run(context.Background(), sandbox.Spec{Command: []string{"python3", "/workspace/main.py"}, Workspace: ws})
				}
			})
		}
		wg.Wait()
	}
	time.Sleep(time.Minute)
}
