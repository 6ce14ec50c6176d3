package kernel

import (
	"bytes"
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/sandbox/namespace"
)

var (
	backendOnce sync.Once
	backend     *namespace.Backend
	backendErr  error
)

// testSandbox is the real namespace backend, with warm interpreters when
// the tests run as root, shared by the package's tests.
func testSandbox(t testing.TB) *namespace.Backend {
	t.Helper()
	backendOnce.Do(func() { backend, backendErr = namespace.New(namespace.Config{Warm: 2, WarmPython: 2}) })
	if backendErr != nil {
		t.Fatalf("the namespace backend cannot run on this host: %v", backendErr)
	}
	return backend
}

func TestMain(m *testing.M) {
	code := m.Run()
	if backend != nil {
		_ = backend.Close()
	}
	os.Exit(code)
}

func newSession(t *testing.T, lim sandbox.Limits) (*Session, string) {
	t.Helper()
	ws := t.TempDir()
	s := NewSession(Options{Sandbox: testSandbox(t), Workspace: ws, Limits: lim})
	t.Cleanup(func() { _ = s.Close() })
	return s, ws
}

func run(t *testing.T, s *Session, code string, timeout time.Duration) Result {
	t.Helper()
	res, err := s.Exec(context.Background(), Cell{Code: code, Timeout: timeout})
	if err != nil {
		t.Fatalf("exec %q: %v", code, err)
	}
	return res
}

func plain(r Result) string {
	for _, d := range r.Display {
		if d.Kind == "result" {
			return d.Data["text/plain"]
		}
	}
	return ""
}

func wantStatus(t *testing.T, r Result, want sandbox.Status) {
	t.Helper()
	if r.Status != want {
		t.Fatalf("status %s (%s), want %s\nstdout: %s\nstderr: %s", r.Status, r.Message, want, r.Stdout, r.Stderr)
	}
}

func TestStateAndDisplay(t *testing.T) {
	s, _ := newSession(t, sandbox.Limits{})
	var streamed bytes.Buffer
	res, err := s.Exec(context.Background(), Cell{Code: "x = 41\nprint('hello', flush=True)\nx + 1",
		OnOutput: func(stream string, data []byte) { streamed.Write(data) }})
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, res, sandbox.StatusOK)
	if plain(res) != "42" || string(res.Stdout) != "hello\n" || streamed.String() != "hello\n" || res.ExecutionCount != 1 || res.KernelRestarted {
		t.Fatalf("result %q, stdout %q, streamed %q, count %d, restarted %v", plain(res), res.Stdout, streamed.String(), res.ExecutionCount, res.KernelRestarted)
	}
	res = run(t, s, "x * 2", 0)
	if plain(res) != "82" || res.ExecutionCount != 2 {
		t.Fatalf("state lost: %q, count %d, stderr %s", plain(res), res.ExecutionCount, res.Stderr)
	}
	// The scientific stack is loaded and named as usual.
	res = run(t, s, "import sys\nsorted(m for m in ('pandas', 'numpy', 'matplotlib.pyplot') if m in sys.modules), pd.__name__, np.__name__, plt.get_backend()", 0)
	if plain(res) != "(['matplotlib.pyplot', 'numpy', 'pandas'], 'pandas', 'numpy', 'agg')" {
		t.Fatalf("preloaded: %q %s", plain(res), res.Stderr)
	}
	res = run(t, s, "import sys; sys.stdout.buffer.write(b'\\xff\\xfe'); print('', file=sys.stderr, end='err'); None", 0)
	if !bytes.Equal(res.Stdout, []byte("\xff\xfe")) || string(res.Stderr) != "err" || len(res.Display) != 0 {
		t.Fatalf("stdout %q stderr %q display %v", res.Stdout, res.Stderr, res.Display)
	}
	res = run(t, s, "import subprocess\nsubprocess.run(['echo', 'from a child'])\nprint(input('?'))", 0)
	if string(res.Stdout) != "from a child\n?" || !strings.Contains(string(res.Stderr), "EOFError") {
		t.Fatalf("stdout %q stderr %q", res.Stdout, res.Stderr)
	}
	res, err = s.Exec(context.Background(), Cell{Code: "input().upper()", Stdin: "given\n"})
	if err != nil || plain(res) != "'GIVEN'" {
		t.Fatalf("stdin: %q %v %s", plain(res), err, res.Stderr)
	}
}

func TestDataFrameAndFigures(t *testing.T) {
	s, ws := newSession(t, sandbox.Limits{})
	res := run(t, s, `import numpy as np, pandas as pd
rng = np.random.default_rng(1)
df = pd.DataFrame({"Product": rng.choice(["a", "b", "c", "d", "e", "f"], 10000), "Revenue": rng.random(10000)})
df.head(3)`, 0)
	wantStatus(t, res, sandbox.StatusOK)
	if len(res.Display) != 1 || !strings.Contains(res.Display[0].Data["text/html"], "<table") || !strings.Contains(res.Display[0].Data["text/plain"], "Revenue") {
		t.Fatalf("display %+v, stderr %s", res.Display, res.Stderr)
	}
	res = run(t, s, "df.groupby('Product')['Revenue'].sum().nlargest(5)", 0)
	if !strings.Contains(plain(res), "Name: Revenue, dtype: float64") {
		t.Fatalf("series %q %s", plain(res), res.Stderr)
	}
	res = run(t, s, "import matplotlib.pyplot as plt\ndf.groupby('Product')['Revenue'].sum().plot(kind='bar')\nplt.figure(); plt.plot([1, 2, 3])\ndisplay('shown')", 0)
	wantStatus(t, res, sandbox.StatusOK)
	if len(res.Images) != 2 || res.Images[0] != "figure-1.png" || res.Images[1] != "figure-2.png" {
		t.Fatalf("images %v, display %d, stderr %s", res.Images, len(res.Display), res.Stderr)
	}
	var figures int
	for _, d := range res.Display {
		if d.Kind == "figure" {
			figures++
			png, _ := base64.StdEncoding.DecodeString(d.Data["image/png"])
			onDisk, err := os.ReadFile(filepath.Join(ws, d.File))
			if err != nil || !bytes.Equal(png, onDisk) || !bytes.HasPrefix(png, []byte("\x89PNG")) {
				t.Fatalf("figure %s: %v", d.File, err)
			}
		}
	}
	if figures != 2 || res.Display[0].Kind != "display" || res.Display[0].Data["text/plain"] != "'shown'" {
		t.Fatalf("display %+v", res.Display)
	}
	// Figures are closed after the cell; the next one saves only its own.
	res = run(t, s, "plt.plot([3, 2, 1]); None", 0)
	if len(res.Images) != 1 || res.Images[0] != "figure-3.png" {
		t.Fatalf("images %v", res.Images)
	}
}

func TestErrorsAndExit(t *testing.T) {
	s, _ := newSession(t, sandbox.Limits{})
	run(t, s, "y = 'kept'", 0)
	res := run(t, s, "def f():\n    raise ValueError('bad value 42')\nf()", 0)
	wantStatus(t, res, sandbox.StatusError)
	stderr := string(res.Stderr)
	if res.ExitStatus() != 1 || res.ErrorName != "ValueError" || !strings.HasPrefix(stderr, "Traceback (most recent call last):\n  File \"<cell 2>\", line 3, in <module>\n    f()\n") ||
		!strings.Contains(stderr, "raise ValueError('bad value 42')") || strings.Contains(stderr, "kernel.py") {
		t.Fatalf("exit %d, error %s, stderr:\n%s", res.ExitStatus(), res.ErrorName, stderr)
	}
	res = run(t, s, "def (", 0)
	if res.Status != sandbox.StatusError || !strings.Contains(string(res.Stderr), "SyntaxError") || strings.Contains(string(res.Stderr), "Traceback") {
		t.Fatalf("syntax error: %s %q", res.Status, res.Stderr)
	}
	res = run(t, s, "import sys\nprint('partial')\nsys.exit(3)", 0)
	if res.Status != sandbox.StatusError || res.ExitStatus() != 3 || string(res.Stdout) != "partial\n" || res.KernelDied {
		t.Fatalf("exit: %s %d %q died=%v", res.Status, res.ExitStatus(), res.Stdout, res.KernelDied)
	}
	res = run(t, s, "y", 0)
	if plain(res) != "'kept'" || res.KernelRestarted {
		t.Fatalf("state after sys.exit: %q restarted=%v", plain(res), res.KernelRestarted)
	}
}

func TestInterruptKeepsState(t *testing.T) {
	s, _ := newSession(t, sandbox.Limits{})
	run(t, s, "z = [1, 2, 3]", 0)
	start := time.Now()
	res := run(t, s, "import time\nprint('sleeping', flush=True)\ntime.sleep(60)", time.Second)
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("the interrupted cell took %v", took)
	}
	wantStatus(t, res, sandbox.StatusTimeout)
	if res.KernelDied || !strings.Contains(string(res.Stderr), "KeyboardInterrupt") || string(res.Stdout) != "sleeping\n" || res.ExitStatus() != 124 {
		t.Fatalf("died=%v stdout %q stderr %q", res.KernelDied, res.Stdout, res.Stderr)
	}
	res = run(t, s, "while True:\n    z.append(len(z))\n    z = z[:10]", time.Second)
	wantStatus(t, res, sandbox.StatusTimeout)
	res = run(t, s, "z[:3]", 0)
	if plain(res) != "[1, 2, 3]" || res.KernelRestarted {
		t.Fatalf("state after interrupts: %q restarted=%v", plain(res), res.KernelRestarted)
	}
	// Cancelling the context interrupts too.
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	res, err := s.Exec(ctx, Cell{Code: "import time; time.sleep(30)"})
	if err != nil || res.Status != sandbox.StatusSignaled || res.KernelDied {
		t.Fatalf("cancelled: %v %s died=%v", err, res.Status, res.KernelDied)
	}
}

// TestStateLossIsReported ends kernels in every way and checks that the
// cell that lost them says so, and the next one says why.
func TestStateLossIsReported(t *testing.T) {
	for _, tc := range []struct {
		name, code string
		lim        sandbox.Limits
		status     sandbox.Status
		reason     string
		timeout    time.Duration
	}{
		{"StubbornCell", "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass", sandbox.Limits{}, sandbox.StatusTimeout, "timeout", 0},
		// The memory limit, not the cell's wall clock, must end it: on a
		// loaded machine (CI runs packages side by side) filling 300 MiB
		// has taken more than the default 2 s.
		{"Memory", "a = []\nwhile True:\n    a.append(bytearray(16 << 20))", sandbox.Limits{Memory: 300 << 20}, sandbox.StatusMemoryLimit, "memory", 20 * time.Second},
		{"Exit", "import os\nos._exit(3)", sandbox.Limits{}, sandbox.StatusError, "crash", 0},
		{"Segfault", "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)", sandbox.Limits{}, sandbox.StatusSignaled, "crash", 0},
		// A budget the imports fit in when the kernel starts cold (no
		// warm interpreter ready), about a second of CPU.
		{"CPUBudget", "while True:\n    pass", sandbox.Limits{CPUTime: 3 * time.Second}, sandbox.StatusTimeout, "cpu", 20 * time.Second},
		{"Disk", "i = 0\nwhile True:\n    open(f'f{i}', 'wb').write(b'x' * (1 << 20)); i += 1", sandbox.Limits{Disk: 20 << 20}, sandbox.StatusSignaled, "disk", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := newSession(t, tc.lim)
			run(t, s, "state = 'old'", 0)
			start := time.Now()
			res := run(t, s, tc.code, max(tc.timeout, 2*time.Second))
			if time.Since(start) > 15*time.Second {
				t.Errorf("the cell took %v", time.Since(start))
			}
			wantStatus(t, res, tc.status)
			if !res.KernelDied || !strings.Contains(res.Message, "state is lost") {
				t.Fatalf("died=%v message %q", res.KernelDied, res.Message)
			}
			res = run(t, s, "'state' in globals()", 0)
			if !res.KernelRestarted || res.RestartReason != tc.reason || plain(res) != "False" {
				t.Fatalf("restarted=%v reason %q, value %q, stderr %s", res.KernelRestarted, res.RestartReason, plain(res), res.Stderr)
			}
		})
	}
}

// TestHostileProtocol has a cell write to the protocol itself: a line
// larger than any message, garbage, a message for another cell, a forged
// figure name, an image that is not one. The host drops them all.
func TestHostileProtocol(t *testing.T) {
	s, ws := newSession(t, sandbox.Limits{})
	res := run(t, s, `import os, sys, json
fd = sys._getframe(1).f_globals['_proto_out']
os.write(fd, b'{"t": "stream", "data": "' + b'A' * (30 << 20) + b'"}\n')
os.write(fd, b'not json\n\x00\xff\n')
os.write(fd, json.dumps({"t": "done", "id": "c999", "status": "ok"}).encode() + b'\n')
me = sys._getframe(1).f_globals['_state']['id']
os.write(fd, json.dumps({"t": "display", "id": me, "kind": "figure", "file": "../../etc/passwd", "data": {"text/plain": "x", "image/png": "bm90IGEgcG5n", "text/x-evil": "y"}}).encode() + b'\n')
print('still here')`, 0)
	wantStatus(t, res, sandbox.StatusOK)
	if res.Dropped != 1 || len(res.Images) != 0 || len(res.Display) != 1 || len(res.Display[0].Data) != 1 || string(res.Stdout) != "still here\n" {
		t.Fatalf("dropped %d, images %v, display %+v, stdout %q", res.Dropped, res.Images, res.Display, res.Stdout)
	}
	if entries, _ := os.ReadDir(ws); len(entries) != 0 {
		t.Fatalf("the workspace holds %v", entries)
	}
	res = run(t, s, "1 + 1", 0)
	if plain(res) != "2" {
		t.Fatalf("after the hostile cell: %q %s", plain(res), res.Stderr)
	}
	// A cell that closes the protocol leaves a kernel that cannot answer:
	// its cell times out, the kernel is killed, and the next cell says so.
	res = run(t, s, "import os, sys\nos.close(sys._getframe(1).f_globals['_proto_out'])", time.Second)
	if !res.KernelDied {
		t.Fatalf("status %s died=%v", res.Status, res.KernelDied)
	}
	// (It may also die by itself first, failing to write: a crash.)
	if res = run(t, s, "1", 0); !res.KernelRestarted || (res.RestartReason != "timeout" && res.RestartReason != "crash") {
		t.Fatalf("restarted=%v reason %q", res.KernelRestarted, res.RestartReason)
	}
}

// TestIdleKernelMemory measures an idle kernel with the stack loaded, as
// the host sees it: at most 150 MB resident.
func TestIdleKernelMemory(t *testing.T) {
	s, _ := newSession(t, sandbox.Limits{})
	run(t, s, "1", 0)
	time.Sleep(200 * time.Millisecond)
	st := s.Status()
	t.Logf("idle kernel: RSS %d MiB, cgroup memory %d MiB, preloaded %v", st.RSSBytes>>20, st.MemoryBytes>>20, st.Preloaded)
	if !st.Alive || !st.Preloaded || st.RSSBytes <= 0 {
		t.Fatalf("status %+v", st)
	}
	if st.RSSBytes > 150e6 {
		t.Errorf("an idle kernel holds %d MB resident, more than 150 MB", st.RSSBytes/1e6)
	}
}

// TestSessionStart starts the kernel ahead of the first cell, which then
// finds it and reports no restart; a restart after it is reported.
func TestSessionStart(t *testing.T) {
	s, _ := newSession(t, sandbox.Limits{})
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := s.Status(); !st.Alive {
		t.Fatalf("no kernel after Start: %+v", st)
	}
	if r := run(t, s, "x = 1\nx", 0); r.KernelRestarted || r.ExecutionCount != 1 || plain(r) != "1" {
		t.Fatalf("first cell: %+v", r)
	}
	_ = s.Restart(context.Background())
	if r := run(t, s, "'x' in globals()", 0); !r.KernelRestarted || r.RestartReason != "restart" || plain(r) != "False" {
		t.Fatalf("after the restart: %+v", r)
	}
	if r := run(t, s, "1", 0); r.KernelRestarted {
		t.Fatalf("a second restart reported: %+v", r)
	}
}

// A cell imports the workspace's own modules, as Python's prompt imports
// from its working directory.
func TestCellsImportTheWorkspacesModules(t *testing.T) {
	s, ws := newSession(t, sandbox.Limits{})
	if err := os.WriteFile(filepath.Join(ws, "helpers.py"), []byte("ANSWER = 42\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := run(t, s, "import helpers\nhelpers.ANSWER", 30*time.Second); r.Status != sandbox.StatusOK || plain(r) != "42" {
		t.Fatalf("status %s, value %q, stderr %q", r.Status, plain(r), r.Stderr)
	}
}
