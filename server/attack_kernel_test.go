package server

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/codeagent/codeagent/sandbox"
)

// Attacks of issue 27 through a session's kernel, from the attacker's side:
// the kernel's program races root's merge of a one-shot execution in the
// same session, and holds host disk in files it unlinked. Run as root (only
// root merges and only root has the size-limited file systems), bounded in
// time and count, with the victim in a temporary directory.

// swapperCell starts, in the kernel, a thread that for at most secs
// seconds swaps each name fI of the workspace with a link lI to victim
// (renameat2 with RENAME_EXCHANGE), so that a root that acts on fI by name
// after checking it acts on the victim.
func swapperCell(victim string, n, secs int) string {
	return fmt.Sprintf(`import ctypes, os, threading, time
_libc = ctypes.CDLL(None, use_errno=True)
def _swap():
    for i in range(%[2]d):
        try:
            os.symlink(%[1]q, f"l{i}")
        except FileExistsError:
            pass
    end = time.time() + %[3]d
    while time.time() < end:
        for i in range(%[2]d):
            _libc.renameat2(-100, f"f{i}".encode(), -100, f"l{i}".encode(), 2)
threading.Thread(target=_swap, daemon=True).start()
"swapping"`, victim, n, secs)
}

// fifoProgram leaves n FIFOs fI of mode 0666 (the merge makes each and then
// sets its mode and owner).
func fifoProgram(n int) string {
	return fmt.Sprintf(`import os
for i in range(%d):
    if not os.path.lexists(f"f{i}"):
        os.mkfifo(f"f{i}", 0o666)
print("fifos")`, n)
}

// victimFile makes a root-owned file of mode 0600 outside every workspace
// and returns its path and a check that it is unchanged.
func victimFile(t *testing.T) (string, func()) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the merge of a run's writes is root's: run as root")
	}
	p := filepath.Join(t.TempDir(), "shadow")
	if err := os.WriteFile(p, []byte("root:secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p, func() {
		t.Helper()
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatalf("the victim file: %v", err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if fi.Mode() != 0o600 || st.Uid != 0 || st.Gid != 0 {
			t.Errorf("the victim file outside the workspace is now %v %d:%d, was -rw------- 0:0", fi.Mode(), st.Uid, st.Gid)
		}
		if b, _ := os.ReadFile(p); string(b) != "root:secret\n" {
			t.Errorf("the victim file was written: %q", b)
		}
	}
}

// TestServeAttackKernelRacesMerge: over HTTP, a session's kernel swaps the
// names of a one-shot execution's FIFOs with links to a host file while
// the execution's writes are merged; the host file keeps its mode.
func TestServeAttackKernelRacesMerge(t *testing.T) {
	victim, check := victimFile(t)
	ts := newTestServer(t, testOptions{noModel: true, warmPython: 2})
	s := ts.createSession(t, "", "race")
	const n, secs = 3000, 20
	if r := ts.cell(t, "", s.ID, swapperCell(victim, n, secs), 200); r.Status != "ok" {
		t.Fatalf("the swapping cell: %+v", r)
	}
	deadline := time.Now().Add(secs * time.Second)
	for round := 0; round < 4 && time.Now().Before(deadline); round++ {
		var res sandbox.ResultJSON
		ts.json(t, "POST", "/v1/sessions/"+s.ID+"/exec", "", map[string]any{"language": "python", "code": fifoProgram(n)}, http.StatusOK, &res)
		if res.Status != "ok" {
			t.Fatalf("round %d: the one-shot execution: %+v", round, res)
		}
		ts.cell(t, "", s.ID, "1", 200) // and the kernel's own changes reach the workspace
		check()
	}
	check()
}

// TestMCPAttackKernelRacesMerge is the same attack through MCP: the
// kernel of execute_code with keep_state races the merge of execute_code
// without it, in one MCP session.
func TestMCPAttackKernelRacesMerge(t *testing.T) {
	victim, check := victimFile(t)
	ts := newTestServer(t, testOptions{cfg: Config{Keys: twoKeys}, noModel: true, mcp: true, warmPython: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sess, err := connectMCP(ctx, ts.URL, aliceToken)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	call := func(code string, keep bool) map[string]any {
		t.Helper()
		res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: "execute_code",
			Arguments: map[string]any{"language": "python", "code": code, "keep_state": keep}})
		if err != nil || res.IsError {
			t.Fatalf("execute_code: %v %+v", err, res)
		}
		out, _ := res.StructuredContent.(map[string]any)
		return out
	}
	const n, secs = 3000, 20
	if out := call(swapperCell(victim, n, secs), true); out["status"] != "ok" {
		t.Fatalf("the swapping cell: %v", out)
	}
	deadline := time.Now().Add(secs * time.Second)
	for round := 0; round < 3 && time.Now().Before(deadline); round++ {
		if out := call(fifoProgram(n), false); out["status"] != "ok" {
			t.Fatalf("round %d: the one-shot execution: %v", round, out)
		}
		call("1", true)
		check()
	}
	check()
}

// TestServeAttackKernelHoldsUnlinkedFiles: over HTTP, a session's kernel
// writes files it unlinks and keeps open past its cell; what the host took
// for them stays within the kernel's disk limit plus one file size.
func TestServeAttackKernelHoldsUnlinkedFiles(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a size-limited file system for a kernel's writes needs root; an ordinary user's kernel is bounded by the watcher (docs/ARCHITECTURE.md)")
	}
	lim := sandbox.Limits{Disk: 20 << 20, FileSize: 4 << 20}
	ts := newTestServer(t, testOptions{cfg: Config{KernelLimits: lim}, noModel: true, warmPython: 2})
	s := ts.createSession(t, "", "hold")
	hold := `import os
_held = globals().setdefault("_held", [])
_chunk = b"\1" * (1 << 20)
_total = 0
try:
    for i in range(100):
        fd = os.open(f"u{len(_held)}", os.O_WRONLY | os.O_CREAT, 0o644)
        os.unlink(f"u{len(_held)}")
        _held.append(fd)
        _total += os.write(fd, _chunk)
except OSError as e:
    pass
_total`
	bound := lim.Disk + lim.FileSize
	var total int64
	for cell := 0; cell < 3; cell++ { // the files stay open across cells
		r := ts.cell(t, "", s.ID, hold, 200)
		n, err := strconv.ParseInt(strings.TrimSpace(resultText(r)), 10, 64)
		if err != nil {
			if r.KernelDied {
				break // killed for the disk limit: what it held is gone
			}
			t.Fatalf("cell %d: %+v", cell, r)
		}
		total += n
		t.Logf("cell %d: write(2) accepted %d MiB, %d MiB in all", cell, n>>20, total>>20)
	}
	if total > bound {
		t.Errorf("the kernel held %d MiB of unlinked files, more than its disk limit plus one file size (%d MiB)", total>>20, bound>>20)
	}
}
