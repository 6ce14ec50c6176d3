package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/codeagent/codeagent/llm/llmtest"
)

// smallDisk mounts a tmpfs of size bytes on a new directory for the test
// (root only) and returns it.
func smallDisk(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs needs root")
	}
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size="+size+",mode=0700"); err != nil {
		t.Skipf("mount a tmpfs: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	return dir
}

// TestAuditDiskFull: the program fills the data directory's disk. Where its
// writes reach the workspace as it runs, the record of its execution's end
// cannot be written: the run stops with an error saying so and log
// --verify reports the gap instead of "intact". Where they land on a file
// system of their own (the namespace backend as root), the disk fills as
// they are brought back, after the end record: the run stops saying so and
// the log is intact. Either way the second program never runs and the turn
// is recorded as failed (with the store's reserve).
func TestAuditDiskFull(t *testing.T) {
	data := smallDisk(t, "8m")
	fill := "try:\n    with open('fill.bin', 'wb') as f:\n        for i in range(64):\n            f.write(b'x' * (1 << 20))\n            f.flush()\nexcept OSError as e:\n    print('disk full', e.errno)\n"
	srv, flags := modelServer(t,
		pyAnswer(fill),
		llmtest.Say(`{"task_complete": false, "missing": "more"}`),
		pyAnswer("open('second.txt', 'w').close()\nprint('second ran')\n"),
		llmtest.Say(`{"task_complete": true, "missing": ""}`),
	)
	code, out, errOut := runCLI(t, "", append([]string{"run", "--data-dir", data, "--session", "full"}, append(flags, "fill the disk")...)...)
	// Where the program's writes land on a file system of their own (an
	// overlay as root), the disk fills when they are brought back, before
	// the end record; elsewhere it fills under the program.
	audit := strings.Contains(errOut, "the audit log could not be written (the disk of the data directory is full)")
	if code == exitOK || !audit && !strings.Contains(errOut, "the disk of the workspace is full: what the program wrote is only partly in the workspace") {
		t.Fatalf("run on a full disk: exit %d\n%s\n%s", code, out, errOut)
	}
	ws := sessionWorkspace(data, "full")
	if _, err := os.Stat(filepath.Join(ws, "second.txt")); err == nil {
		t.Fatal("the next program ran although the previous execution could not be audited")
	}
	if n := len(srv.Requests()); n != 1 {
		t.Errorf("%d model requests: the run went on after the audit failed", n)
	}
	os.Remove(filepath.Join(ws, "fill.bin")) // room for the readers
	code, out, _ = runCLI(t, "", "sessions", "show", "full", "--data-dir", data)
	if code != 0 || !strings.Contains(out, "turn 1 · failed") {
		t.Errorf("the turn after the audit failure: %d\n%s", code, out)
	}
	code, out, errOut = runCLI(t, "", "log", "--verify", "--data-dir", data)
	if !audit {
		// The end record was written before the disk filled: nothing is
		// missing, and the record says how the execution ended.
		if code != exitOK || !strings.Contains(out, "audit log intact") {
			t.Fatalf("verify after a full disk at copy back: %d\n%s\n%s", code, out, errOut)
		}
		return
	}
	if code != exitFailure || !strings.Contains(errOut, "audit log incomplete") || !strings.Contains(errOut, "execution 1 has no end record") ||
		!strings.Contains(errOut, "could not be written") {
		t.Fatalf("verify after the audit failure: %d\n%s\n%s", code, out, errOut)
	}
}

// execStarts returns the times of a session's exec_start records.
func execStarts(t *testing.T, data, session string) []time.Time {
	t.Helper()
	_, out, _ := runCLI(t, "", "log", "--data-dir", data, "--session", session, "--json")
	var recs []struct {
		Kind string
		Time time.Time
	}
	if err := json.Unmarshal([]byte(out), &recs); err != nil {
		t.Fatalf("log: %v\n%s", err, out)
	}
	var ts []time.Time
	for _, r := range recs {
		if r.Kind == "exec_start" {
			ts = append(ts, r.Time)
		}
	}
	return ts
}

// waitFor polls until the file holds want, or fails the test.
func waitForFile(t *testing.T, file, want string, cmd *exec.Cmd) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if b, _ := os.ReadFile(file); strings.Contains(string(b), want) {
			return
		}
	}
	cmd.Process.Kill()
	t.Fatalf("%s never held %q", file, want)
}

// TestSessionTwoProcesses runs one session from two real processes: the
// second is refused at once, naming the first (exit 75), without asking
// the model or touching the workspace; with --wait a third waits for the
// first to end, and then its executions count against the session's rate
// limit together with the first's (3 a minute: the fourth waits ~20 s).
// Both turns succeed; none is marked interrupted.
func TestSessionTwoProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the rate limit")
	}
	bin := mcpBinary(t)
	data := t.TempDir()
	m := filepath.Join(t.TempDir(), "agent.yaml")
	os.WriteFile(m, []byte("agent:\n  tools:\n    - name: execute_python\n  limits:\n    executions_per_minute: 3\n"), 0o644)
	srv, flags := modelServer(t,
		pyAnswer("import time\ntime.sleep(3)\nraise SystemExit('A1 failed')\n"), pyAnswer("print('A done')\n"),
		pyAnswer("raise SystemExit('B1 failed')\n"), pyAnswer("print('B done')\n"))
	args := func(events, task string, extra ...string) []string {
		a := append([]string{"run", "--data-dir", data, "--session", "shared", "--manifest", m, "--no-verify", "--events", events}, extra...)
		return append(append(a, flags...), task)
	}
	dir := t.TempDir()
	evA, evB := filepath.Join(dir, "a.jsonl"), filepath.Join(dir, "b.jsonl")
	a := exec.Command(bin, args(evA, "task A")...)
	var aErr syncBuffer
	a.Stderr = &aErr
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	waitForFile(t, evA, `"type":"checked"`, a)

	c := exec.Command(bin, args(filepath.Join(dir, "c.jsonl"), "task C")...)
	out, _ := c.CombinedOutput()
	if c.ProcessState.ExitCode() != exitBusy || !strings.Contains(string(out), `session "shared" is in use by codeagent run (pid `+strconv.Itoa(a.Process.Pid)) {
		t.Fatalf("a second process on the session: exit %d\n%s", c.ProcessState.ExitCode(), out)
	}
	if n := len(srv.Requests()); n != 1 {
		t.Fatalf("%d model requests: the refused process asked the model", n)
	}
	b := exec.Command(bin, args(evB, "task B", "--wait")...)
	var bErr syncBuffer
	b.Stderr = &bErr
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	if err := a.Wait(); err != nil {
		t.Fatalf("A: %v\n%s", err, aErr.String())
	}
	if err := b.Wait(); err != nil {
		t.Fatalf("B: %v\n%s", err, bErr.String())
	}
	if !strings.Contains(bErr.String(), "waiting for it (--wait)") {
		t.Errorf("B did not say it waits: %s", bErr.String())
	}
	code, show, _ := runCLI(t, "", "sessions", "show", "shared", "--data-dir", data)
	if code != 0 || !strings.Contains(show, "turn 1 · succeeded") || !strings.Contains(show, "turn 2 · succeeded") || strings.Contains(show, "interrupted") {
		t.Fatalf("turns: %s", show)
	}
	if b, _ := os.ReadFile(filepath.Join(sessionWorkspace(data, "shared"), ".codeagent", "solution.py")); !strings.Contains(string(b), "B done") {
		t.Errorf("solution.py is not the last turn's: %q", b)
	}
	starts := execStarts(t, data, "shared")
	if len(starts) != 4 {
		t.Fatalf("%d executions, want 4", len(starts))
	}
	if d := starts[3].Sub(starts[0]); d < 15*time.Second {
		t.Errorf("4 executions in %v at 3 a minute: the two processes did not share the limit", d)
	}
}

// TestPruneKeepsLiveSession: prune and rm leave a session alone while a
// process runs it; its run ends normally, and afterwards both work.
func TestPruneKeepsLiveSession(t *testing.T) {
	bin := mcpBinary(t)
	data := t.TempDir()
	_, flags := modelServer(t, pyAnswer("import time\ntime.sleep(4)\nopen('out.txt', 'w').write('x')\nprint('ok')\n"))
	ev := filepath.Join(t.TempDir(), "ev.jsonl")
	a := exec.Command(bin, append(append([]string{"run", "--data-dir", data, "--session", "live", "--no-verify", "--events", ev}, flags...), "work")...)
	var aErr syncBuffer
	a.Stderr = &aErr
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	waitForFile(t, ev, `"type":"checked"`, a)
	code, out, errOut := runCLI(t, "", "sessions", "prune", "--older-than", "0s", "--data-dir", data)
	if code != 0 || !strings.Contains(out, "kept session live: in use by pid "+strconv.Itoa(a.Process.Pid)) || strings.Contains(out, "removed") {
		t.Fatalf("prune during a run: %d %s %s", code, out, errOut)
	}
	if code, _, errOut := runCLI(t, "", "sessions", "rm", "live", "--data-dir", data); code != exitBusy || !strings.Contains(errOut, "in use") {
		t.Fatalf("rm during a run: %d %s", code, errOut)
	}
	if err := a.Wait(); err != nil {
		t.Fatalf("the run whose session was pruned: %v\n%s", err, aErr.String())
	}
	if strings.Contains(aErr.String(), "FOREIGN KEY") {
		t.Errorf("store errors in the run: %s", aErr.String())
	}
	if _, err := os.Stat(filepath.Join(sessionWorkspace(data, "live"), "out.txt")); err != nil {
		t.Errorf("the run's file: %v", err)
	}
	code, out, _ = runCLI(t, "", "sessions", "show", "live", "--data-dir", data)
	if code != 0 || !strings.Contains(out, "turn 1 · succeeded") {
		t.Fatalf("after the run: %s", out)
	}
	if code, out, _ := runCLI(t, "", "sessions", "prune", "--older-than", "0s", "--data-dir", data); code != 0 || !strings.Contains(out, "removed session live") {
		t.Fatalf("prune after the run: %d %s", code, out)
	}
}
