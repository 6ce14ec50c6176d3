package sandboxtest

import (
	"bytes"
	"context"
	"io"
	"os"
	"strings"
	"sync"
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
// shares its own quota with its sandboxes: the documented residual.) The
// program says it holds them on its standard output, which the host reads
// live, and waits for a line on its standard input: a backend need not
// show the workspace to the host while the program runs.
func inotifyQuota(t *testing.T, sb sandbox.Sandbox) {
	if os.Geteuid() != 0 {
		t.Skip("run as an ordinary user, programs run as that user and share its quotas (docs/ARCHITECTURE.md)")
	}
	code := `
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
fds = []
for i in range(1024):
    fd = libc.inotify_init1(0)
    if fd < 0:
        break
    fds.append(fd)
print('holding', len(fds), flush=True)
sys.stdin.readline()
print(len(fds))
`
	l, _ := lang.Lookup("python")
	stdinR, stdinW := io.Pipe()
	defer stdinW.Close()
	ready := &lineSignal{c: make(chan struct{})}
	spec := sandbox.Spec{Command: l.Command("/code/main.py"), Workspace: t.TempDir(), Env: l.Env,
		Files:  []sandbox.File{{Path: "/code/main.py", Data: []byte(code)}},
		Stdin:  stdinR,
		Stdout: ready,
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
	select {
	case <-ready.c:
	case <-time.After(15 * time.Second):
	}
	fd, hostErr := unix.InotifyInit1(unix.IN_CLOEXEC)
	if hostErr == nil {
		unix.Close(fd)
	}
	_, _ = stdinW.Write([]byte("done\n"))
	_ = stdinW.Close()
	o := <-done
	if o.err != nil {
		t.Fatalf("sandbox error: %v", o.err)
	}
	wantStatus(t, o.res, sandbox.StatusOK)
	held := strings.TrimPrefix(strings.TrimSpace(string(o.res.Stdout)), "holding ")
	held, _, _ = strings.Cut(held, "\n")
	t.Logf("the sandbox held %s inotify instances", held)
	if hostErr != nil {
		t.Fatalf("while the sandbox held %s inotify instances the host user could not get one: %v", held, hostErr)
	}
}

// lineSignal closes c when the first line has been written to it.
type lineSignal struct {
	once sync.Once
	c    chan struct{}
}

func (s *lineSignal) Write(p []byte) (int, error) {
	if bytes.IndexByte(p, '\n') >= 0 {
		s.once.Do(func() { close(s.c) })
	}
	return len(p), nil
}
