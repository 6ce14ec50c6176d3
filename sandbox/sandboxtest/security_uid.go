package sandboxtest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/codeagent/codeagent/lang"
	"github.com/codeagent/codeagent/sandbox"
)

// rootOnlyProc are /proc files that tell about the host's kernel and other
// users: root-only on the host, and masked by Docker or by codeagent.
var rootOnlyProc = []string{
	"/proc/keys", "/proc/key-users", "/proc/kpageflags", "/proc/kpagecount", "/proc/kpagecgroup",
	"/proc/slabinfo", "/proc/vmallocinfo", "/proc/pagetypeinfo", "/proc/timer_list", "/proc/sched_debug",
	"/proc/kmsg", "/proc/iomem", "/proc/ioports", "/proc/zoneinfo", "/proc/kcore", "/proc/latency_stats",
}

// procSecrets reads every root-only /proc file: each must be missing,
// unreadable or empty.
func procSecrets(t *testing.T, sb sandbox.Sandbox) {
	var attempts []string
	for _, p := range rootOnlyProc {
		if _, err := os.Lstat(p); err == nil {
			attempts = append(attempts, "assert open("+quote(p)+", 'rb').read(256)")
		}
	}
	res := execute(t, sb, program{lang: "python", code: leakCheck(attempts...)})
	wantAllBlocked(t, res, len(attempts))
}

func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", `\'`) + "'" }

// inotifyQuota has a program take as many inotify instances as the kernel
// gives it (at most 1024), and while it holds them the host's own user
// must still get one: a sandbox's per-user kernel quotas must not be those
// of the user codeagent runs as when that is root. (An unprivileged caller
// shares its own quota with its sandboxes: the documented residual.)
func inotifyQuota(t *testing.T, sb sandbox.Sandbox) {
	if os.Geteuid() != 0 {
		t.Skip("run as an ordinary user, programs run as that user and share its quotas (docs/ARCHITECTURE.md)")
	}
	ws := t.TempDir()
	code := `
import ctypes, os, time
libc = ctypes.CDLL(None, use_errno=True)
fds = []
for i in range(1024):
    fd = libc.inotify_init1(0)
    if fd < 0:
        break
    fds.append(fd)
open('ready', 'w').write(str(len(fds)))
deadline = time.time() + 10
while not os.path.exists('done') and time.time() < deadline:
    time.sleep(0.01)
print(len(fds))
`
	l, _ := lang.Lookup("python")
	spec := sandbox.Spec{Command: l.Command("/code/main.py"), Workspace: ws, Env: l.Env,
		Files:  []sandbox.File{{Path: "/code/main.py", Data: []byte(code)}},
		Limits: sandbox.Limits{WallTime: 20 * time.Second, OpenFiles: 2048}}
	type outcome struct {
		res sandbox.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := sb.Run(context.Background(), spec)
		done <- outcome{res, err}
	}()
	deadline := time.Now().Add(15 * time.Second)
	for !fileExists(filepath.Join(ws, "ready")) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	fd, hostErr := unix.InotifyInit1(unix.IN_CLOEXEC)
	if hostErr == nil {
		unix.Close(fd)
	}
	if err := os.WriteFile(filepath.Join(ws, "done"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	o := <-done
	if o.err != nil {
		t.Fatalf("sandbox error: %v", o.err)
	}
	wantStatus(t, o.res, sandbox.StatusOK)
	if hostErr != nil {
		t.Fatalf("while the sandbox held %s inotify instances the host user could not get one: %v", strings.TrimSpace(string(o.res.Stdout)), hostErr)
	}
}
