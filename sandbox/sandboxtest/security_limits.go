package sandboxtest

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/codeagent/codeagent/sandbox"
)

// tcpBufferMemory queues data in loopback TCP connections that nobody
// reads, with large buffers, up to 300 MiB and for at most 10 seconds,
// under a 64 MiB memory limit: socket buffers are kernel memory that must
// count against the sandbox's limit. The program reports what it queued
// after every connection; the last report must stay under the limit, or the
// sandbox must be killed for memory.
func tcpBufferMemory(t *testing.T, sb sandbox.Sandbox) {
	if featuresOf(sb).RlimitsOnly {
		t.Skip("without a cgroup no kernel memory is counted (a documented weaker mode)")
	}
	lim := sandbox.Limits{Memory: 64 << 20, OpenFiles: 2048, WallTime: 20 * time.Second}
	code := `
import socket, time
TOTAL, queued, pairs = 300 << 20, 0, []
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 20)
srv.bind(("127.0.0.1", 0))
srv.listen(1024)
chunk = b"x" * (256 << 10)
deadline = time.time() + 10
while queued < TOTAL and time.time() < deadline and len(pairs) < 900:
    try:
        c = socket.socket()
        c.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 << 20)
        c.settimeout(1)
        c.connect(srv.getsockname())
        s, _ = srv.accept()
    except OSError as e:
        print("connect", e.errno, flush=True)
        continue
    pairs.append((c, s))
    c.setblocking(False)
    while queued < TOTAL:
        try:
            n = c.send(chunk)
        except (BlockingIOError, OSError):
            break
        queued += n
    print("queued", queued, len(pairs), flush=True)
print("done", queued, flush=True)
`
	res := execute(t, sb, program{lang: "python", limits: lim, code: code})
	var queued int64
	for _, line := range strings.Split(string(res.Stdout), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && (f[0] == "queued" || f[0] == "done") {
			queued, _ = strconv.ParseInt(f[1], 10, 64)
		}
	}
	t.Logf("status %s, queued %d MiB, peak memory %d MiB", res.Status, queued>>20, res.PeakMemory>>20)
	if queued > lim.Memory {
		t.Fatalf("the program held %d MiB in TCP buffers under a %d MiB memory limit (status %s)", queued>>20, lim.Memory>>20, res.Status)
	}
	if res.Status != sandbox.StatusMemoryLimit && !bytes.Contains(res.Stdout, []byte("done")) {
		t.Fatalf("status %s without finishing:\n%.2000s\nstderr: %.2000s", res.Status, res.Stdout, res.Stderr)
	}
}

// cpuQuota runs two busy processes for 1.5 seconds: under the default limit
// of one core they get at most about one core; with Limits.CPUs of 0.5 half
// of one, which shows that a per-run value applies; with 2 they may use more.
func cpuQuota(t *testing.T, sb sandbox.Sandbox) {
	if featuresOf(sb).RlimitsOnly {
		t.Skip("without a cgroup there is no CPU quota (a documented weaker mode)")
	}
	code := `
import os, time
pids = []
for _ in range(2):
    pid = os.fork()
    if pid == 0:
        end = time.time() + 1.5
        while time.time() < end:
            pass
        os._exit(0)
    pids.append(pid)
for p in pids:
    os.waitpid(p, 0)
`
	for _, tc := range []struct {
		cpus, max float64
	}{{0, 1.2}, {0.5, 0.65}, {2, 2.4}} {
		res := execute(t, sb, program{lang: "python", code: code, limits: sandbox.Limits{CPUs: tc.cpus, WallTime: 20 * time.Second}})
		wantStatus(t, res, sandbox.StatusOK)
		ratio := res.CPUTime.Seconds() / res.WallTime.Seconds()
		t.Logf("CPUs %g: %v of CPU in %v, %.2f cores", tc.cpus, res.CPUTime, res.WallTime, ratio)
		if res.CPUTime <= 0 {
			t.Fatalf("CPU time not measured")
		}
		if ratio > tc.max {
			t.Errorf("two busy processes used %.2f cores under Limits.CPUs %g (0: the default of 1); at most %.2f expected", ratio, tc.cpus, tc.max)
		}
	}
}
