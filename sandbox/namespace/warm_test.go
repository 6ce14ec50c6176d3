//go:build linux && (amd64 || arm64)

package namespace

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/codeagent/codeagent/internal/proctest"
	"github.com/codeagent/codeagent/lang"
	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/sandbox/internal/backendkit"
	"github.com/codeagent/codeagent/sandbox/namespace/internal/warm"
	"github.com/codeagent/codeagent/sandbox/sandboxtest"
)

func newWarmBackend(t testing.TB, n int) *Backend {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("warm interpreters need root; unprivileged, every program runs cold")
	}
	b, err := New(Config{WarmPython: n})
	if err != nil {
		t.Fatalf("the namespace backend cannot run on this host: %v", err)
	}
	if b.warm == nil {
		t.Skip("no cgroups: warm interpreters are off")
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// warmCase is one program run cold and warm.
type warmCase struct {
	name    string
	command []string          // default: python3 /code/main.py
	code    string            // /code/main.py
	files   map[string]string // in the workspace
	stdin   string
	env     map[string]string
	outputs []string // workspace files whose contents must match
}

var warmCases = []warmCase{
	{name: "Argv", command: []string{"python3", "/code/main.py", "a b", "-x"}, code: "import sys\nprint(sys.argv, sys.orig_argv, sys.path[0], __file__)"},
	{name: "Globals", code: "import sys\nprint(sorted(globals()), __name__, __package__, __spec__, __cached__, type(__loader__).__name__, __loader__.name, __loader__.path, sys.modules['__main__'] is sys.modules[__name__])"},
	{name: "Traceback", code: "def f(x):\n    return 1 / x\ndef g():\n    f(0)\ng()\n"},
	{name: "ChainedTraceback", code: "try:\n    {}['k']\nexcept KeyError as e:\n    raise ValueError('bad') from e\n"},
	{name: "SyntaxError", code: "print('never')\ndef (\n"},
	{name: "ExitCode", code: "import sys\nprint('partial')\nsys.exit(3)"},
	{name: "ExitMessage", code: "import sys\nsys.exit('going away')"},
	{name: "ExitNone", code: "raise SystemExit"},
	{name: "ExitLarge", code: "import sys\nsys.exit(300)"},
	{name: "ExitInFunction", code: "import sys\ndef quit():\n    try:\n        sys.exit(4)\n    finally:\n        print('finally')\nquit()"},
	{name: "KeyboardInterrupt", code: "print('before', flush=True)\nraise KeyboardInterrupt"},
	{name: "Signal", code: "import os, signal\nos.kill(os.getpid(), signal.SIGTERM)"},
	{name: "Stdin", stdin: "line one\nline two\n", code: "import sys\nprint(sys.stdin.readline().upper(), sys.stdin.read()[::-1], sys.stdin.isatty())"},
	{name: "Env", env: map[string]string{"GREETING": "hi", "MODE": "fast"}, code: "import os\nprint(sorted(os.environ.items()))\nimport subprocess\nprint(subprocess.run(['sh', '-c', 'echo $GREETING $PWD'], capture_output=True, text=True).stdout)"},
	{name: "Cwd", files: map[string]string{"data.csv": "a,b\n1,2\n"}, code: "import os\nprint(os.getcwd(), sorted(os.listdir('.')), open('data.csv').read())"},
	{name: "ImportFromWorkspaceScript", command: []string{"python3", "/workspace/prog.py"}, files: map[string]string{"helper.py": "VALUE = 42\n", "prog.py": "import helper, sys\nprint(helper.VALUE, sys.path[0], __file__)\n"}},
	{name: "ImportFromWorkspaceNotOnPath", files: map[string]string{"helper.py": "VALUE = 42\n"}, code: "import helper\n"},
	{name: "PackageRelativeImport", command: []string{"python3", "-m", "pkg.main", "arg"}, files: map[string]string{"pkg/__init__.py": "", "pkg/util.py": "def f(): return 'util'\n",
		"pkg/main.py": "from .util import f\nimport sys\nprint(f(), __name__, __package__, sys.argv, sys.path[0])\nraise RuntimeError('from a module')\n"}},
	{name: "DashC", command: []string{"python3", "-c", "import sys; print(sys.argv, sys.path[0], __name__); 1/0", "x"}},
	{name: "MissingFile", command: []string{"python3", "/workspace/none.py"}},
	{name: "MainGuard", code: "def main():\n    print('main ran')\nif __name__ == '__main__':\n    main()\n"},
	{name: "Atexit", code: "import atexit\n@atexit.register\ndef bye():\n    print('atexit ran')\nprint('body')\n"},
	{name: "AtexitAfterError", code: "import atexit\natexit.register(print, 'cleanup')\nraise ValueError('x')\n"},
	{name: "Threads", code: "import threading, time\ndef work():\n    time.sleep(0.2)\n    print('thread done', flush=True)\nthreading.Thread(target=work).start()\nprint('main done', flush=True)\n"},
	{name: "DaemonThread", code: "import threading, time\nthreading.Thread(target=time.sleep, args=(60,), daemon=True).start()\nprint('not waiting')\n"},
	{name: "UnclosedFile", outputs: []string{"out.txt"}, code: "f = open('out.txt', 'w')\nf.write('flushed at exit')\n"},
	{name: "Finalizer", code: "class A:\n    def __del__(self):\n        print('del ran')\na = A()\n"},
	{name: "Pickle", code: "import pickle\nclass P:\n    pass\nprint(type(pickle.loads(pickle.dumps(P()))).__module__)\n"},
	{name: "Warning", code: "import warnings\nwarnings.warn('careful')\nprint('after')\n"},
	{name: "Pid", code: "import os\nprint(os.getpid(), os.getppid(), os.getuid(), os.getgid(), os.getgroups())"},
	{name: "Pandas", outputs: []string{"plot.png.size"}, code: `import pandas as pd, numpy as np, matplotlib.pyplot as plt, os
df = pd.DataFrame({"Product": list("abcab"), "Revenue": [1.0, 2.0, 3.0, 4.0, 5.0]})
print(df.groupby("Product")["Revenue"].sum().nlargest(2))
df.plot(); plt.savefig("plot.png")
open("plot.png.size", "w").write(str(os.path.getsize("plot.png") > 1000))
`},
}

// address matches object addresses in reprs, which differ between runs.
var address = regexp.MustCompile(`0x[0-9a-f]+`)

// TestWarmMatchesCold runs each program cold and warm and compares what
// it did: status, exit code, signal, stdout, stderr and the files it wrote.
func TestWarmMatchesCold(t *testing.T) {
	warm := newWarmBackend(t, 1)
	warm.warm.Fill()
	cold, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer cold.Close()
	py, _ := lang.Lookup("python")
	for _, tc := range warmCases {
		t.Run(tc.name, func(t *testing.T) {
			run := func(sb *Backend) (sandbox.Result, string) {
				ws := t.TempDir()
				for name, data := range tc.files {
					p := filepath.Join(ws, name)
					if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
						t.Fatal(err)
					}
				}
				env := map[string]string{}
				for k, v := range py.Env {
					env[k] = v
				}
				for k, v := range tc.env {
					env[k] = v
				}
				spec := sandbox.Spec{Command: tc.command, Workspace: ws, Env: env, Limits: sandbox.Limits{WallTime: 20 * time.Second}}
				if spec.Command == nil {
					spec.Command = []string{"python3", "/code/main.py"}
				}
				if tc.code != "" {
					spec.Files = []sandbox.File{{Path: "/code/main.py", Data: []byte(tc.code)}}
				}
				if tc.stdin != "" {
					spec.Stdin = strings.NewReader(tc.stdin)
				}
				res, err := sb.Run(context.Background(), spec)
				if err != nil {
					t.Fatal(err)
				}
				var files []string
				for _, name := range tc.outputs {
					b, err := os.ReadFile(filepath.Join(ws, name))
					files = append(files, name+"="+string(b)+errString(err))
				}
				return res, strings.Join(files, "\n")
			}
			warm.quiesce() // the pool is full again
			before := warm.WarmRuns()
			w, wf := run(warm)
			if warm.WarmRuns() != before+1 {
				t.Fatalf("the program did not run warm")
			}
			c, cf := run(cold)
			same := func(what string, a, b any) {
				if sa, sb := address.ReplaceAllString(toString(a), "0x"), address.ReplaceAllString(toString(b), "0x"); sa != sb {
					t.Errorf("%s differs:\nwarm: %s\ncold: %s", what, sa, sb)
				}
			}
			same("status", w.Status, c.Status)
			same("exit code", w.ExitCode, c.ExitCode)
			same("signal", w.Signal, c.Signal)
			same("stdout", w.Stdout, c.Stdout)
			same("stderr", w.Stderr, c.Stderr)
			same("files", wf, cf)
		})
	}
}

func errString(err error) string {
	if err != nil {
		return " (" + err.Error() + ")"
	}
	return ""
}

func toString(v any) string {
	if b, ok := v.([]byte); ok {
		return string(b)
	}
	return fmt.Sprint(v)
}

// TestConformanceWarm runs the conformance suite with warm interpreters:
// every Python program of the suite that fits one runs warm, and every
// property must hold for it as for a cold sandbox.
func TestConformanceWarm(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode")
	}
	b := newWarmBackend(t, 4)
	b.warm.Fill()
	b.quiesce()
	sandboxtest.Run(t, b)
	// Runs find no warm interpreter when they follow each other faster
	// than the pool refills; those run cold.
	if n := b.WarmRuns(); n < 20 {
		t.Errorf("only %d programs of the suite ran warm", n)
	} else {
		t.Logf("%d programs of the suite ran warm", n)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if n := b.liveCgroups.Load(); n != 0 {
		t.Errorf("%d cgroups left behind", n)
	}
}

// runWarm runs code as /code/main.py in a warm interpreter of b, failing
// the test when it ran cold.
func runWarm(t *testing.T, b *Backend, ws, code string, lim sandbox.Limits) sandbox.Result {
	t.Helper()
	b.warm.Fill()
	b.quiesce()
	before := b.WarmRuns()
	res, err := b.Run(context.Background(), sandbox.Spec{Command: []string{"python3", "/code/main.py"}, Workspace: ws,
		Files: []sandbox.File{{Path: "/code/main.py", Data: []byte(code)}}, Env: warm.Env(), Limits: lim})
	if err != nil {
		t.Fatal(err)
	}
	if b.WarmRuns() != before+1 {
		t.Fatal("the program did not run warm")
	}
	return res
}

// TestWarmLimits checks what the warm path sets at the execution: the
// CPU-time limit counts from the program's start, the memory limit, the
// sizes of /tmp and /dev/shm, /code read-only, the workspace, and nothing
// mounted on the host.
func TestWarmLimits(t *testing.T) {
	b := newWarmBackend(t, 1)
	t.Run("CPUTime", func(t *testing.T) {
		res := runWarm(t, b, t.TempDir(), "while True:\n    pass\n", sandbox.Limits{CPUTime: time.Second, WallTime: 20 * time.Second})
		if res.Status != sandbox.StatusTimeout || !strings.Contains(res.Message, "CPU-time") {
			t.Fatalf("status %s %q", res.Status, res.Message)
		}
		// The imports' CPU (more than a second for pandas) does not count:
		// the program gets about its second. Under CI's load the cgroup's
		// account of it once read 863 ms (the rlimit counts the process's
		// own CPU, the result the cgroup's since the attach), so the bound
		// below leaves room for that and still fails if the imports'
		// CPU were charged to the program.
		if res.CPUTime < 750*time.Millisecond || res.CPUTime > 4*time.Second {
			t.Errorf("the program used %v of CPU under a limit of 1s", res.CPUTime)
		}
	})
	t.Run("CPUTimeExcludesWarmUp", func(t *testing.T) {
		res := runWarm(t, b, t.TempDir(), "print('hi')", sandbox.Limits{})
		if res.Status != sandbox.StatusOK || res.CPUTime > 300*time.Millisecond {
			t.Errorf("status %s, CPU %v (the warm-up's is not the program's)", res.Status, res.CPUTime)
		}
	})
	t.Run("AboveTheWarmUps", func(t *testing.T) {
		// Limits over the warm-up's (a kernel's hour of CPU, more files)
		// run warm too, and the program gets exactly them.
		lim := sandbox.Limits{CPUTime: time.Hour, OpenFiles: 4096, FileSize: 1 << 30}
		res := runWarm(t, b, t.TempDir(), "import resource as r\nprint([r.getrlimit(x)[1] for x in (r.RLIMIT_NOFILE, r.RLIMIT_FSIZE)])", lim)
		if res.Status != sandbox.StatusOK || string(res.Stdout) != "[4096, 1073741824]\n" {
			t.Fatalf("status %s stdout %q stderr %s", res.Status, res.Stdout, res.Stderr)
		}
	})
	t.Run("DiskByConstruction", func(t *testing.T) {
		// As root the workspace is an overlay on a file system of the
		// limit's size, warm as cold: a write past it fails (ENOSPC), even
		// into a file without a name, and what fits reaches the workspace.
		if b.ReactiveDisk() {
			t.Skip("no overlay workspaces here")
		}
		ws := t.TempDir()
		res := runWarm(t, b, ws, `import os
open('kept.txt', 'w').write('kept')
try:
    for i in range(40):
        fd = os.open(f'u{i}', os.O_WRONLY | os.O_CREAT); os.unlink(f'u{i}')
        os.write(fd, b'x' * (1 << 20))
except OSError as e:
    print('errno', e.errno, i)
`, sandbox.Limits{Disk: 10 << 20, FileSize: 1 << 20, WallTime: 20 * time.Second})
		if res.Status != sandbox.StatusOK || !strings.HasPrefix(string(res.Stdout), "errno 28 ") {
			t.Fatalf("status %s stdout %q stderr %s", res.Status, res.Stdout, res.Stderr)
		}
		if b, err := os.ReadFile(filepath.Join(ws, "kept.txt")); err != nil || string(b) != "kept" {
			t.Fatalf("the workspace after the run: %q %v", b, err)
		}
	})
	t.Run("Memory", func(t *testing.T) {
		res := runWarm(t, b, t.TempDir(), "a = []\nwhile True:\n    a.append(bytearray(8 << 20))\n", sandbox.Limits{Memory: 256 << 20, WallTime: 20 * time.Second})
		if res.Status != sandbox.StatusMemoryLimit || res.PeakMemory > 300<<20 {
			t.Fatalf("status %s, peak %d MiB", res.Status, res.PeakMemory>>20)
		}
	})
	t.Run("MountsAndFiles", func(t *testing.T) {
		ws := t.TempDir()
		var st syscall.Stat_t
		if err := syscall.Stat(ws, &st); err != nil {
			t.Fatal(err)
		}
		if !b.ReactiveDisk() {
			st.Ino = 2 // /workspace is an overlay, whose root is its own
		}
		hostMounts, _ := os.ReadFile("/proc/self/mountinfo")
		res := runWarm(t, b, ws, `import os
s = os.statvfs('/tmp'); m = os.statvfs('/dev/shm')
print(s.f_blocks * s.f_frsize >> 20, m.f_blocks * m.f_frsize >> 20, os.stat('/workspace').st_ino, sorted(os.listdir('/code')))
try:
    open('/code/new.py', 'w')
except OSError as e:
    print('code', e.errno)
open('made.txt', 'w').write('x')
`, sandbox.Limits{Disk: 40 << 20, Memory: 200 << 20})
		want := fmt.Sprintf("40 40 %d ['main.py']\ncode 30\n", st.Ino)
		if res.Status != sandbox.StatusOK || string(res.Stdout) != want {
			t.Fatalf("status %s, stdout %q, want %q; stderr %s", res.Status, res.Stdout, want, res.Stderr)
		}
		if _, err := os.Stat(filepath.Join(ws, "made.txt")); err != nil {
			t.Errorf("the host does not see the program's file: %v", err)
		}
		// Other processes may mount meanwhile; none below the workspace
		// or at /workspace, /code or the backend's directories.
		after, _ := os.ReadFile("/proc/self/mountinfo")
		for _, line := range strings.Split(string(after), "\n") {
			if strings.Contains(string(hostMounts), line) {
				continue
			}
			if f := strings.Fields(line); len(f) > 4 && (strings.HasPrefix(f[4], ws) || f[4] == "/workspace" || f[4] == "/code" || strings.HasPrefix(f[4], b.mnt)) {
				t.Errorf("a mount appeared on the host: %s", line)
			}
		}
	})
}

// TestWarmOnlyForProgramsThatMayUseIt: with an interpreter ready, a
// program whose caller says it imports only the standard library runs
// cold and leaves the interpreter in the pool; one that imports pandas
// takes it.
func TestWarmOnlyForProgramsThatMayUseIt(t *testing.T) {
	b := newWarmBackend(t, 1)
	b.warm.Fill()
	b.quiesce()
	run := func(code string, imports []string) {
		t.Helper()
		res, err := b.Run(context.Background(), sandbox.Spec{Command: []string{"python3", "/code/main.py"}, Workspace: t.TempDir(),
			Files: []sandbox.File{{Path: "/code/main.py", Data: []byte(code)}}, Env: warm.Env(), Imports: imports})
		if err != nil || res.Status != sandbox.StatusOK {
			t.Fatalf("run: %v %s %s", err, res.Status, res.Stderr)
		}
	}
	run("import json\nprint(json.dumps(1))", []string{"json"})
	if n := b.WarmRuns(); n != 0 {
		t.Fatalf("a program of the standard library only ran warm (%d warm runs)", n)
	}
	if got := b.warm.Stats().Ready; got != 1 {
		t.Fatalf("%d interpreters ready after a cold run, want the 1 kept", got)
	}
	run("import pandas\nprint(pandas.__name__)", []string{"pandas"})
	if n := b.WarmRuns(); n != 1 {
		t.Fatalf("a pandas program ran cold (%d warm runs)", n)
	}
}

// TestWarmUpRunsBehindExecutions: a warm interpreter imports its stack at
// the lowest CPU weight, and the program it then runs has the default
// weight back.
func TestWarmUpRunsBehindExecutions(t *testing.T) {
	newWarmBackend(t, 1)      // skips without warm interpreters
	const uid = 3_100_000_000 // the backend's sandboxes alone run as these
	b, err := New(Config{WarmPython: 1, HostUID: uid})
	if err != nil {
		t.Skip(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	b.warm.Fill()
	b.quiesce()
	for deadline := time.Now().Add(30 * time.Second); b.warm.Stats().Ready == 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
	}
	if got, want := cpuWeightOf(t, uid), "low"; got != want {
		t.Fatalf("a ready interpreter's weight is %s, want %s", got, want)
	}
	var during string
	res, err := b.Run(context.Background(), sandbox.Spec{Command: []string{"python3", "/code/main.py"}, Workspace: t.TempDir(),
		Files: []sandbox.File{{Path: "/code/main.py", Data: []byte("import sys\nsys.stdin.read()")}}, Env: warm.Env(),
		Imports: []string{"pandas"}, Stdin: strings.NewReader(""),
		Started: func(sandbox.Running) { during = cpuWeightOf(t, uid) }})
	if err != nil || res.Status != sandbox.StatusOK || b.WarmRuns() != 1 {
		t.Fatalf("run: %v %s %s (warm runs %d)", err, res.Status, res.Stderr, b.WarmRuns())
	}
	if during != "default" {
		t.Fatalf("the program ran at CPU weight %s, want default", during)
	}
}

// cpuWeightOf reads the CPU weight of the cgroup of a process running as
// a uid of [uid, uid+HostUIDCount): "low", "default" or the value read.
func cpuWeightOf(t *testing.T, uid int) string {
	t.Helper()
	procs := proctest.Live(uid, backendkit.HostUIDCount)
	if len(procs) == 0 {
		t.Fatal("no process of the sandbox")
	}
	// A process listed may end before its cgroup is read (one of the
	// sandbox's short-lived ones): the first that is still there counts.
	var cgs map[string]string
	for _, p := range procs {
		c, err := procCgroups(strconv.Itoa(p.PID))
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		cgs = c
		break
	}
	if cgs == nil {
		t.Fatalf("the %d processes of the sandbox ended before their cgroups were read", len(procs))
	}
	file, names := filepath.Join("/sys/fs/cgroup", cgs[""], "cpu.weight"), map[string]string{"1": "low", "100": "default"}
	if p, ok := cgs["cpu"]; ok { // v1
		file, names = filepath.Join("/sys/fs/cgroup/cpu", p, "cpu.shares"), map[string]string{"10": "low", "1024": "default"}
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	v := strings.TrimSpace(string(b))
	if name, ok := names[v]; ok {
		return name
	}
	return v
}
