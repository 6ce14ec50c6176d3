package sandboxtest

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/codeagent/codeagent/lang"
	"github.com/codeagent/codeagent/sandbox"
)

// goProgram is a Go program with goroutines that writes go.txt and prints 42.
const goProgram = `package main

import (
	"fmt"
	"os"
	"sync"
)

func main() {
	var wg sync.WaitGroup
	out := make([]int, 8)
	for i := range out {
		wg.Add(1)
		go func(i int) { defer wg.Done(); out[i] = 6 * i }(i)
	}
	wg.Wait()
	os.WriteFile("go.txt", []byte("ok"), 0o644)
	fmt.Println(out[7])
}
`

// RunBenign checks that ordinary programs behave as they would on a host.
func RunBenign(t *testing.T, sb sandbox.Sandbox) {
	t.Run("HelloPython", func(t *testing.T) {
		res := execute(t, sb, program{lang: "python", code: "print('hello')"})
		wantStatus(t, res, sandbox.StatusOK)
		if string(res.Stdout) != "hello\n" || res.ExitCode != 0 {
			t.Fatalf("stdout %q exit %d", res.Stdout, res.ExitCode)
		}
		if res.WallTime <= 0 {
			t.Errorf("wall time not measured")
		}
	})
	t.Run("NodeAndBash", func(t *testing.T) {
		res := execute(t, sb, program{lang: "javascript", code: "console.log(6*7)"})
		wantStatus(t, res, sandbox.StatusOK)
		if string(res.Stdout) != "42\n" {
			t.Fatalf("node stdout %q, stderr %s", res.Stdout, res.Stderr)
		}
		res = execute(t, sb, program{lang: "bash", code: "echo $((6*7)) from $0; exit 0"})
		wantStatus(t, res, sandbox.StatusOK)
		if !strings.HasPrefix(string(res.Stdout), "42 from") {
			t.Fatalf("bash stdout %q", res.Stdout)
		}
	})
	t.Run("TrustStore", func(t *testing.T) { benignTrustStore(t, sb) })
	t.Run("Go", func(t *testing.T) {
		// go run builds in the sandbox (go, compile and link are processes
		// of their own) with its build cache in the workspace, as a
		// session's: the second build finds the first one's cache.
		golang, err := lang.Lookup("go")
		if err != nil {
			t.Fatal(err)
		}
		ws := t.TempDir()
		for i := range 2 {
			res := execute(t, sb, program{lang: "go", code: goProgram, ws: ws, env: golang.CacheEnv})
			wantStatus(t, res, sandbox.StatusOK)
			if string(res.Stdout) != "42\n" {
				t.Fatalf("run %d: stdout %q, stderr %s", i+1, res.Stdout, res.Stderr)
			}
		}
		if b, err := os.ReadFile(filepath.Join(ws, "go.txt")); err != nil || string(b) != "ok" {
			t.Errorf("go.txt = %q, %v", b, err)
		}
		if fi, err := os.Stat(filepath.Join(ws, lang.CacheDir, "go-build")); err != nil || !fi.IsDir() {
			t.Errorf("no build cache in the workspace: %v", err)
		}
	})
	t.Run("ExitCode", func(t *testing.T) {
		res := execute(t, sb, program{lang: "python", code: "import sys; print('partial'); sys.exit(3)"})
		wantStatus(t, res, sandbox.StatusError)
		if res.ExitCode != 3 || res.ExitStatus() != 3 || string(res.Stdout) != "partial\n" {
			t.Fatalf("exit %d, stdout %q", res.ExitCode, res.Stdout)
		}
	})
	t.Run("Traceback", func(t *testing.T) {
		res := execute(t, sb, program{lang: "python", code: "def f():\n    raise ValueError('bad value 42')\nf()\n"})
		wantStatus(t, res, sandbox.StatusError)
		if res.ExitCode != 1 || !bytes.Contains(res.Stderr, []byte("Traceback")) || !bytes.Contains(res.Stderr, []byte("ValueError: bad value 42")) {
			t.Fatalf("exit %d, stderr %q", res.ExitCode, res.Stderr)
		}
	})
	t.Run("Signal", func(t *testing.T) {
		res := execute(t, sb, program{lang: "python", code: "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"})
		wantStatus(t, res, sandbox.StatusSignaled)
		if res.Signal != 11 || res.ExitStatus() != 139 {
			t.Fatalf("signal %d exit %d", res.Signal, res.ExitStatus())
		}
	})
	t.Run("NonUTF8Output", func(t *testing.T) {
		res := execute(t, sb, program{lang: "python", code: "import sys; sys.stdout.buffer.write(b'\\xff\\xfe\\x00ok'); sys.stderr.buffer.write(b'\\xc3\\x28')"})
		wantStatus(t, res, sandbox.StatusOK)
		if !bytes.Equal(res.Stdout, []byte("\xff\xfe\x00ok")) || !bytes.Equal(res.Stderr, []byte("\xc3\x28")) {
			t.Fatalf("stdout %q stderr %q", res.Stdout, res.Stderr)
		}
	})
	t.Run("StdinAndEnv", func(t *testing.T) {
		res := execute(t, sb, program{lang: "python", stdin: "from stdin\n", env: map[string]string{"GREETING": "hi"},
			code: "import os, sys; print(sys.stdin.read().strip(), os.environ['GREETING'])"})
		wantStatus(t, res, sandbox.StatusOK)
		if string(res.Stdout) != "from stdin hi\n" {
			t.Fatalf("stdout %q stderr %s", res.Stdout, res.Stderr)
		}
	})
	t.Run("Threads", func(t *testing.T) {
		res := execute(t, sb, program{lang: "python", code: `
import threading
out = []
def work(i): out.append(sum(range(i * 1000)))
ts = [threading.Thread(target=work, args=(i,)) for i in range(16)]
[t.start() for t in ts]; [t.join() for t in ts]
print(len(out))
`})
		wantStatus(t, res, sandbox.StatusOK)
		if string(res.Stdout) != "16\n" {
			t.Fatalf("stdout %q stderr %s", res.Stdout, res.Stderr)
		}
	})
	t.Run("WorkspaceFiles", func(t *testing.T) {
		ws := t.TempDir()
		if err := os.WriteFile(filepath.Join(ws, "in.csv"), []byte("a,b\n1,2\n3,4\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		res := execute(t, sb, program{lang: "python", ws: ws, code: `
import csv, os
rows = list(csv.DictReader(open("in.csv")))
os.makedirs("out", exist_ok=True)
open("out/sum.txt", "w").write(str(sum(int(r["b"]) for r in rows)))
print(os.getcwd())
`})
		wantStatus(t, res, sandbox.StatusOK)
		got, err := os.ReadFile(filepath.Join(ws, "out", "sum.txt"))
		if err != nil || string(got) != "6" {
			t.Fatalf("host sees %q (%v); stderr %s", got, err, res.Stderr)
		}
		if strings.TrimSpace(string(res.Stdout)) != sandbox.WorkspacePath {
			t.Errorf("working directory %q, want %s", res.Stdout, sandbox.WorkspacePath)
		}
	})
	t.Run("WorkspaceEdits", func(t *testing.T) { workspaceEdits(t, sb) })
	t.Run("PandasMatplotlibPNG", func(t *testing.T) {
		ws := t.TempDir()
		res := execute(t, sb, program{lang: "python", ws: ws, limits: sandbox.Limits{WallTime: 60 * time.Second, Memory: 512 << 20}, code: `
import numpy as np, pandas as pd
import matplotlib.pyplot as plt
df = pd.DataFrame({"month": range(1, 13), "revenue": np.arange(12) * 10.0})
df.plot(x="month", y="revenue")
plt.savefig("trend.png")
print(int(df.revenue.sum()))
`})
		wantStatus(t, res, sandbox.StatusOK)
		png, err := os.ReadFile(filepath.Join(ws, "trend.png"))
		if err != nil || !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) || len(png) < 1000 {
			t.Fatalf("no PNG in workspace (%v, %d bytes); stderr %s", err, len(png), res.Stderr)
		}
		if string(res.Stdout) != "660\n" {
			t.Fatalf("stdout %q", res.Stdout)
		}
		if res.PeakMemory <= 0 {
			t.Errorf("peak memory not measured")
		}
	})
	t.Run("Pytest", func(t *testing.T) {
		ws := t.TempDir()
		if err := os.WriteFile(filepath.Join(ws, "test_x.py"), []byte("def test_ok():\n    assert 1 + 1 == 2\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		res := execute(t, sb, program{lang: "python", ws: ws, code: "import pytest, sys; sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', 'test_x.py']))"})
		wantStatus(t, res, sandbox.StatusOK)
		if !bytes.Contains(res.Stdout, []byte("1 passed")) {
			t.Fatalf("stdout %s stderr %s", res.Stdout, res.Stderr)
		}
	})
	t.Run("CommandNotFound", func(t *testing.T) {
		res := execute(t, sb, program{lang: "bash", code: "no-such-command-xyz"})
		wantStatus(t, res, sandbox.StatusError)
		if res.ExitCode != 127 {
			t.Fatalf("exit %d", res.ExitCode)
		}
	})
}
