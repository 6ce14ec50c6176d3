package sandboxtest

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/codeagent/codeagent/sandbox"
)

// RunSecurity attacks the sandbox for real and checks the host afterwards.
func RunSecurity(t *testing.T, sb sandbox.Sandbox) {
	t.Run("ForkBomb", func(t *testing.T) { forkBomb(t, sb) })
	t.Run("MemoryBomb", func(t *testing.T) { memoryBomb(t, sb) })
	t.Run("CPUSpin", func(t *testing.T) { cpuSpin(t, sb) })
	t.Run("OutputFlood", func(t *testing.T) { outputFlood(t, sb) })
	t.Run("DiskFill", func(t *testing.T) { diskFill(t, sb) })
	t.Run("DiskLimit", func(t *testing.T) { diskLimit(t, sb) })
	t.Run("RenameStorm", func(t *testing.T) { renameStorm(t, sb) })
	t.Run("Daemon", func(t *testing.T) { daemon(t, sb) })
	t.Run("HostFiles", func(t *testing.T) { hostFiles(t, sb) })
	t.Run("Network", func(t *testing.T) { network(t, sb) })
	t.Run("UnixSockets", func(t *testing.T) { unixSockets(t, sb) })
	t.Run("KillHostProcess", func(t *testing.T) { killHost(t, sb) })
	t.Run("EnvironmentLeak", func(t *testing.T) { envLeak(t, sb) })
	t.Run("ThreadPools", func(t *testing.T) { threadPools(t, sb) })
	t.Run("Privileges", func(t *testing.T) { privileges(t, sb) })
	t.Run("Devices", func(t *testing.T) { devices(t, sb) })
	t.Run("ProcIsolation", func(t *testing.T) { procIsolation(t, sb) })
	t.Run("TmpDoesNotPersist", func(t *testing.T) { tmpPersistence(t, sb) })
	t.Run("InheritedDescriptors", func(t *testing.T) { inheritedFDs(t, sb) })
	t.Run("ProcSecrets", func(t *testing.T) { procSecrets(t, sb) })
	t.Run("TraceKey", func(t *testing.T) { traceKey(t, sb) })
	t.Run("InotifyQuota", func(t *testing.T) { inotifyQuota(t, sb) })
	t.Run("PerSandboxQuota", func(t *testing.T) { perSandboxQuota(t, sb) })
	t.Run("SocketFamilies", func(t *testing.T) { socketFamilies(t, sb) })
	t.Run("ForeignABIs", func(t *testing.T) { foreignABIs(t, sb) })
	t.Run("SetuidFiles", func(t *testing.T) { setuidFiles(t, sb) })
	t.Run("HostUID", func(t *testing.T) { hostUID(t, sb) })
	t.Run("WorkspaceOwnership", func(t *testing.T) { workspaceOwnership(t, sb) })
	t.Run("WorldWritableWorkspace", func(t *testing.T) { worldWritable(t, sb) })
	t.Run("TCPBufferMemory", func(t *testing.T) { tcpBufferMemory(t, sb) })
	t.Run("CPUQuota", func(t *testing.T) { cpuQuota(t, sb) })
	t.Run("BindIsReadOnly", func(t *testing.T) { bindIsReadOnly(t, sb) })
	t.Run("BindDoesNotLinger", func(t *testing.T) { bindDoesNotLinger(t, sb) })
}

func forkBomb(t *testing.T, sb sandbox.Sandbox) {
	// Bounded probe: 100 sleeping children under a limit of 32 processes.
	mark := marker()
	res := execute(t, sb, program{lang: "python", mark: mark, limits: sandbox.Limits{Processes: 32, WallTime: 10 * time.Second}, code: `
import os, time
n = 0
for i in range(100):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(30)
        os._exit(0)
    n += 1
print(n)
`})
	n, _ := strconv.Atoi(strings.TrimSpace(string(res.Stdout)))
	if n <= 0 || n >= 32 {
		t.Fatalf("bounded probe started %d processes under a limit of 32 (status %s, stderr %s)", n, res.Status, res.Stderr)
	}
	assertNoProcesses(t, mark)

	// The real thing: bash's classic fork bomb, kept alive until the timeout.
	mark = marker()
	res = execute(t, sb, program{lang: "bash", mark: mark, limits: sandbox.Limits{Processes: 64, WallTime: 3 * time.Second},
		code: "b(){ b | b & }; b; sleep 30"})
	wantStatus(t, res, sandbox.StatusTimeout)
	assertNoProcesses(t, mark)
}

func memoryBomb(t *testing.T, sb sandbox.Sandbox) {
	lim := sandbox.Limits{Memory: 64 << 20, WallTime: 10 * time.Second}
	// Bounded probe: one allocation of 200 MiB under a 64 MiB limit.
	res := execute(t, sb, program{lang: "python", limits: lim, code: "b = bytearray(200 << 20)\nprint('allocated')"})
	if res.Status == sandbox.StatusOK || bytes.Contains(res.Stdout, []byte("allocated")) {
		t.Fatalf("200 MiB allocated under a 64 MiB limit: %s", res.Status)
	}
	// Unbounded growth, touching every page.
	res = execute(t, sb, program{lang: "python", limits: lim, code: "a = []\nwhile True:\n    a.append(bytearray(8 << 20))\n"})
	if featuresOf(sb).RlimitsOnly {
		// RLIMIT_DATA makes the allocation fail instead.
		wantStatus(t, res, sandbox.StatusError)
		if !bytes.Contains(res.Stderr, []byte("MemoryError")) {
			t.Fatalf("no MemoryError under RLIMIT_DATA: %s", res.Stderr)
		}
		return
	}
	wantStatus(t, res, sandbox.StatusMemoryLimit)
	if res.ExitStatus() != 137 {
		t.Errorf("memory limit exit status %d, want 137", res.ExitStatus())
	}
	if res.PeakMemory > 2*lim.Memory {
		t.Errorf("peak memory %d far above the limit %d", res.PeakMemory, lim.Memory)
	}
}

func cpuSpin(t *testing.T, sb sandbox.Sandbox) {
	res := execute(t, sb, program{lang: "python", limits: sandbox.Limits{WallTime: time.Second}, code: "while True:\n    pass\n"})
	wantStatus(t, res, sandbox.StatusTimeout)
	if res.ExitStatus() != 124 {
		t.Errorf("timeout exit status %d, want 124", res.ExitStatus())
	}
	// A CPU-time limit below the wall-clock limit ends the spin first.
	res = execute(t, sb, program{lang: "python", limits: sandbox.Limits{WallTime: 20 * time.Second, CPUTime: time.Second}, code: "while True:\n    pass\n"})
	wantStatus(t, res, sandbox.StatusTimeout)
	if res.WallTime > 10*time.Second {
		t.Errorf("CPU limit of 1s ended the program only after %v", res.WallTime)
	}
}

func outputFlood(t *testing.T, sb sandbox.Sandbox) {
	lim := sandbox.Limits{Output: 1 << 20, WallTime: 2 * time.Second}
	res := execute(t, sb, program{lang: "python", limits: lim, code: `
import sys
chunk = "x" * 65536
while True:
    sys.stdout.write(chunk)
    sys.stderr.write(chunk)
`})
	wantStatus(t, res, sandbox.StatusTimeout)
	if !res.StdoutTruncated || !res.StderrTruncated {
		t.Errorf("truncation not flagged: %v %v", res.StdoutTruncated, res.StderrTruncated)
	}
	if int64(len(res.Stdout)) != lim.Output || int64(len(res.Stderr)) != lim.Output {
		t.Errorf("kept %d and %d bytes, want %d each", len(res.Stdout), len(res.Stderr), lim.Output)
	}
}

func diskFill(t *testing.T, sb sandbox.Sandbox) {
	ws := t.TempDir()
	lim := sandbox.Limits{Disk: 20 << 20, FileSize: 10 << 20, WallTime: 15 * time.Second}
	// Bounded probe: one 30 MiB file under a 10 MiB file-size limit.
	res := execute(t, sb, program{lang: "python", ws: ws, limits: lim, code: `
try:
    with open("big.bin", "wb") as f:
        f.write(b"\0" * (30 << 20))
    print("wrote")
except OSError as e:
    print("errno", e.errno)
`})
	if bytes.Contains(res.Stdout, []byte("wrote")) {
		t.Fatalf("a 30 MiB file was written under a 10 MiB limit")
	}
	if fi, err := os.Stat(filepath.Join(ws, "big.bin")); err == nil && fi.Size() > lim.FileSize {
		t.Fatalf("big.bin is %d bytes", fi.Size())
	}
	// Many files below the file-size limit until the workspace limit stops it.
	res = execute(t, sb, program{lang: "python", ws: ws, limits: lim, code: `
i = 0
while True:
    with open(f"fill{i}.bin", "wb") as f:
        f.write(b"\1" * (1 << 20))
    i += 1
`})
	if res.Status == sandbox.StatusOK {
		t.Fatalf("disk fill ended ok")
	}
	used := dirSize(ws)
	if used > 200<<20 {
		t.Errorf("workspace grew to %d MiB under a 20 MiB limit", used>>20)
	}
	// /tmp is a size-limited tmpfs.
	res = execute(t, sb, program{lang: "python", limits: lim, code: `
import errno
try:
    with open("/tmp/fill", "wb") as f:
        for _ in range(100):
            f.write(b"\2" * (1 << 20))
            f.flush()
    print("filled")
except OSError as e:
    print("errno", e.errno)
`})
	if bytes.Contains(res.Stdout, []byte("filled")) {
		t.Fatalf("100 MiB written to /tmp under a 20 MiB limit")
	}
}

func dirSize(dir string) int64 {
	var n int64
	_ = filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				n += st.Blocks * 512
			}
		}
		return nil
	})
	return n
}

func daemon(t *testing.T, sb sandbox.Sandbox) {
	code := `
import os, sys, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        time.sleep(1.5)
        open("daemon.txt", "w").write("survived")
        os._exit(0)
    os._exit(0)
print("parent done")
` // the parent returns at once
	for _, tc := range []struct {
		name string
		tail string
		lim  sandbox.Limits
	}{
		{"AfterSuccess", "", sandbox.Limits{WallTime: 10 * time.Second}},
		{"AfterTimeout", "time.sleep(60)\n", sandbox.Limits{WallTime: time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws, mark := t.TempDir(), marker()
			execute(t, sb, program{lang: "python", ws: ws, mark: mark, limits: tc.lim, code: code + tc.tail})
			assertNoProcesses(t, mark)
			time.Sleep(2 * time.Second)
			if fileExists(filepath.Join(ws, "daemon.txt")) {
				t.Fatalf("a daemon outlived the sandbox and wrote to the workspace")
			}
		})
	}
}
