package sandboxtest

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/codeagent/codeagent/lang"
	"github.com/codeagent/codeagent/sandbox"
)

// pipeSize is the size a program grows its pipes to (F_SETPIPE_SZ), the
// kernel's default pipe-max-size.
const pipeSize = 1 << 20

// perSandboxQuota runs two sandboxes at once. The first grows pipes to
// 1 MiB until its user's quota of pipe buffers (pipe-user-pages-soft) is
// used up, and holds them; the second, started meanwhile, must still grow
// a pipe of its own to 1 MiB: each sandbox has its own host uid, so one
// program using up a per-user kernel quota leaves the others theirs. The
// host also checks, while both run, that their processes have different
// uids. Root only: run by an ordinary user, sandboxes share that user's
// quotas (docs/ARCHITECTURE.md), as they do with Features.SharedHostUID.
func perSandboxQuota(t *testing.T, sb sandbox.Sandbox) {
	if os.Geteuid() != 0 {
		t.Skip("run as an ordinary user, programs run as that user and share its quotas (docs/ARCHITECTURE.md)")
	}
	if featuresOf(sb).SharedHostUID {
		t.Skip("this backend runs every sandbox as one host uid (Features.SharedHostUID), which shares its kernel quotas")
	}
	if featuresOf(sb).WholeStdin {
		t.Skip("two programs held at once need a live stdin and stdout (Features.WholeStdin)")
	}
	soft := readProcInt(t, "/proc/sys/fs/pipe-user-pages-soft")
	if soft <= 0 {
		t.Skip("pipe-user-pages-soft is 0: pipe buffers have no per-user quota here")
	}
	if max := readProcInt(t, "/proc/sys/fs/pipe-max-size"); max < pipeSize {
		t.Skipf("pipe-max-size is %d, below %d", max, pipeSize)
	}
	// Enough pipes of pipeSize to pass the quota, and the first one over it
	// refused: 65 with the default quota of 16384 pages.
	pages := pipeSize / os.Getpagesize()
	n := soft/pages + 1
	if n > 120 {
		t.Skipf("pipe-user-pages-soft is %d: %d pipes would be needed", soft, n)
	}
	hog := marker()[:15]
	victim := marker()[:15]
	first := startHeld(t, sb, fmt.Sprintf(`
import ctypes, fcntl, os, sys
ctypes.CDLL(None).prctl(15, %q.encode(), 0, 0, 0)
held, why = [], ""
for i in range(%d):
    r, w = os.pipe()
    held.append((r, w))
    try:
        fcntl.fcntl(w, 1031, %d)  # F_SETPIPE_SZ
    except OSError as e:
        why = e.strerror
        held.pop()
        break
print("grew", len(held), why, flush=True)
sys.stdin.readline()
`, hog, n, pipeSize))
	defer first.release()
	if !first.ready(t) {
		t.Fatalf("the first sandbox did not grow its pipes in time")
	}
	second := startHeld(t, sb, fmt.Sprintf(`
import ctypes, fcntl, os, sys
ctypes.CDLL(None).prctl(15, %q.encode(), 0, 0, 0)
r, w = os.pipe()
try:
    fcntl.fcntl(w, 1031, %d)
    print("grew", fcntl.fcntl(w, 1032), flush=True)  # F_GETPIPE_SZ
except OSError as e:
    print("refused", e.strerror, flush=True)
sys.stdin.readline()
`, victim, pipeSize))
	defer second.release()
	if !second.ready(t) {
		t.Fatalf("the second sandbox did not start in time")
	}
	uids := map[string]string{}
	for _, comm := range []string{hog, victim} {
		if f := strings.Fields(grepLine(processStatus(comm), "Uid:")); len(f) > 1 {
			uids[comm] = strings.Join(f[1:], " ")
		}
	}
	r1, r2 := first.finish(t), second.finish(t)
	wantStatus(t, r1, sandbox.StatusOK)
	wantStatus(t, r2, sandbox.StatusOK)
	out1, out2 := strings.TrimSpace(string(r1.Stdout)), strings.TrimSpace(string(r2.Stdout))
	t.Logf("first: %s (host uids %s); second: %s (host uids %s)", out1, uids[hog], out2, uids[victim])
	var grown int
	if _, err := fmt.Sscanf(out1, "grew %d", &grown); err != nil || grown == n {
		t.Fatalf("the first sandbox was not refused a pipe of %d bytes (%d pages of quota): %s", pipeSize, soft, out1)
	}
	if out2 != fmt.Sprintf("grew %d", pipeSize) {
		t.Errorf("while another sandbox held its quota of pipe buffers, a pipe of this one could not grow to %d: %s", pipeSize, out2)
	}
	if uids[hog] == "" || uids[victim] == "" {
		t.Logf("the sandboxes' processes were not visible on the host; their uids are not compared")
	} else if strings.Fields(uids[hog])[0] == strings.Fields(uids[victim])[0] {
		t.Errorf("two concurrent sandboxes run as one host uid (%s)", uids[hog])
	}
}

// readProcInt reads a number from a /proc file.
func readProcInt(t *testing.T, p string) int {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Skipf("%s: %v", p, err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	return n
}

// processStatus returns /proc/PID/status of the host process named comm,
// or "" when there is none.
func processStatus(comm string) string {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		c, err := os.ReadFile("/proc/" + e.Name() + "/comm")
		if err != nil || strings.TrimSpace(string(c)) != comm {
			continue
		}
		if st, err := os.ReadFile("/proc/" + e.Name() + "/status"); err == nil {
			return string(st)
		}
	}
	return ""
}

// heldRun is a Python program running in the background, held on its
// standard input after its first line of output.
type heldRun struct {
	stdin   *io.PipeWriter
	line    *lineSignal
	done    chan heldOutcome
	outcome *heldOutcome
}

type heldOutcome struct {
	res sandbox.Result
	err error
}

// startHeld starts code in sb; it gets 30 s of wall time.
func startHeld(t *testing.T, sb sandbox.Sandbox, code string) *heldRun {
	t.Helper()
	l, err := lang.Lookup("python")
	if err != nil {
		t.Fatal(err)
	}
	r, w := io.Pipe()
	h := &heldRun{stdin: w, line: &lineSignal{c: make(chan struct{})}, done: make(chan heldOutcome, 1)}
	spec := sandbox.Spec{Command: l.Command("/code/main.py"), Workspace: t.TempDir(), Env: l.Env,
		Files: []sandbox.File{{Path: "/code/main.py", Data: []byte(code)}},
		Stdin: r, Stdout: h.line, Limits: sandbox.Limits{WallTime: 30 * time.Second}}
	go func() {
		res, err := sb.Run(context.Background(), spec)
		h.done <- heldOutcome{res, err}
	}()
	return h
}

// ready waits for the program's first line, or its end.
func (h *heldRun) ready(t *testing.T) bool {
	select {
	case <-h.line.c:
		return true
	case o := <-h.done:
		h.outcome = &o
		return false
	case <-time.After(25 * time.Second):
		return false
	}
}

// release lets the program go on and waits for its end, for a deferred
// call: it fails no test.
func (h *heldRun) release() {
	_ = h.stdin.Close()
	if h.outcome == nil {
		o := <-h.done
		h.outcome = &o
	}
}

// finish lets the program go on and returns its result; a sandbox error
// fails the test. Later calls return the same result.
func (h *heldRun) finish(t *testing.T) sandbox.Result {
	t.Helper()
	h.release()
	if h.outcome.err != nil {
		t.Fatalf("sandbox error: %v", h.outcome.err)
	}
	return h.outcome.res
}
