package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// runCLI runs codeagent in-process and returns its exit code and output.
func runCLI(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if len(args) > 0 && args[0] == "run" {
		// In process, the current folder is this package's: not offered
		// (runs in a folder are tested through the binary, run_folder_test.go).
		args = append([]string{"run", "--no-folder"}, args[1:]...)
	}
	code := run(ctx, args, stdio{in: strings.NewReader(stdin), out: &out, err: &errb})
	return code, out.String(), errb.String()
}

func writeProgram(t *testing.T, name, code string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(code), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestExecHello(t *testing.T) {
	code, out, errOut := runCLI(t, "", "exec", writeProgram(t, "hello.py", "print('hello')"))
	if code != 0 || out != "hello\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

func TestExecExitStatuses(t *testing.T) {
	cases := []struct {
		name, file, code string
		args             []string
		want             int
	}{
		{"program code", "x.py", "import sys; sys.exit(7)", nil, 7},
		{"bash", "x.sh", "exit 4", nil, 4},
		{"timeout", "x.py", "while True: pass", []string{"--timeout", "1s"}, exitTimeout},
		{"memory", "x.py", "a = []\nwhile True: a.append(bytearray(8 << 20))", []string{"--memory", "64MiB", "--timeout", "20s"}, exitMemory},
		{"signal", "x.py", "import os; os.kill(os.getpid(), 15)", nil, 128 + 15},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := append(append([]string{"exec"}, tc.args...), writeProgram(t, tc.file, tc.code))
			if code, _, errOut := runCLI(t, "", args...); code != tc.want {
				t.Fatalf("exit %d, want %d; stderr %s", code, tc.want, errOut)
			}
		})
	}
}

func TestExecUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"exec"},
		{"exec", "/nonexistent/prog.py"},
		{"exec", writeProgram(t, "prog.txt", "print(1)")},
		{"exec", "--lang", "cobol", writeProgram(t, "p.py", "")},
		{"exec", "--memory", "lots", writeProgram(t, "p.py", "")},
		{"exec", "-"},
		{"exec", "--backend", "nope", writeProgram(t, "p.py", "")},
		{"nosuchcommand"},
	} {
		if code, _, errOut := runCLI(t, "", args...); code != exitUsage || errOut == "" {
			t.Errorf("%v: exit %d, stderr %q; want %d and a message", args, code, errOut, exitUsage)
		}
	}
}

func TestExecJSON(t *testing.T) {
	code, out, _ := runCLI(t, "", "exec", "--json", "--timeout", "1s", writeProgram(t, "x.py", "print('partial', flush=True)\nwhile True: pass"))
	if code != exitTimeout {
		t.Fatalf("exit %d", code)
	}
	var res map[string]any
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	for _, k := range []string{"status", "exit_code", "signal", "stdout", "stderr", "stdout_truncated", "stderr_truncated", "wall_ms", "cpu_ms", "peak_memory_bytes"} {
		if _, ok := res[k]; !ok {
			t.Errorf("field %s missing", k)
		}
	}
	if res["status"] != "timeout" || res["exit_code"] != float64(124) || res["stdout"] != "partial\n" || res["wall_ms"].(float64) < 900 {
		t.Errorf("result %v", res)
	}
}

func TestExecStdinProgram(t *testing.T) {
	code, out, errOut := runCLI(t, "console.log('from stdin')", "exec", "--lang", "javascript", "-")
	if code != 0 || out != "from stdin\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

func TestExecWorkdirAndEnv(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ws")
	prog := writeProgram(t, "w.py", "import os\nopen('out.txt', 'w').write(os.environ['K'])")
	if code, _, errOut := runCLI(t, "", "exec", "--workdir", dir, "--env", "K=v1", prog); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if got, err := os.ReadFile(filepath.Join(dir, "out.txt")); err != nil || string(got) != "v1" {
		t.Fatalf("workdir file: %q %v", got, err)
	}
}

func TestExecTemporaryWorkspaceRemoved(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	if code, _, errOut := runCLI(t, "", "exec", writeProgram(t, "w.py", "open('junk.txt', 'w').write('x')")); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if entries, _ := os.ReadDir(tmp); len(entries) != 0 {
		t.Fatalf("temporary workspace left behind: %v", entries)
	}
}

func TestExecSandboxUnavailable(t *testing.T) {
	t.Setenv("PATH", t.TempDir()) // no bwrap to be found
	code, _, errOut := runCLI(t, "", "exec", writeProgram(t, "x.py", "print(1)"))
	if code != exitSandbox || !strings.Contains(errOut, "bubblewrap") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	code, out, _ := runCLI(t, "", "exec", "--json", writeProgram(t, "x.py", "print(1)"))
	if code != exitSandbox || !strings.Contains(out, `"sandbox_error"`) {
		t.Fatalf("json: exit %d, %s", code, out)
	}
}

func TestDoctor(t *testing.T) {
	code, out, _ := runCLI(t, "", "doctor")
	if code != 0 || !strings.Contains(out, "backend:           namespace") || !strings.Contains(out, "network egress:    by allow list") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}

// TestDoctorKubeUnreachable: a cluster that does not answer is reported as
// such, without the defaults of a probe that never ran (permissions "all
// granted", no runtime classes), and the exit status says it is unusable.
func TestDoctorKubeUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := "apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters:\n- name: k\n  cluster: {server: \"https://" + addr +
		"\", insecure-skip-tls-verify: true}\ncontexts:\n- name: c\n  context: {cluster: k, user: u}\nusers:\n- name: u\n  user: {token: x}\n"
	if err := os.WriteFile(kc, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, _ := runCLI(t, "", "doctor", "--backend", "kubernetes", "--kubeconfig", kc)
	if code == 0 || !strings.Contains(out, addr+" (not reached)") || !strings.Contains(out, "API server unreachable") ||
		strings.Contains(out, "permissions:") || strings.Contains(out, "runtime classes:") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}

// TestExecParentKilled kills codeagent itself with SIGKILL mid-run and checks
// that nothing of the sandbox survives it.
func TestExecParentKilled(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "codeagent")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	ws := t.TempDir()
	mark := "cgparent" + strings.ReplaceAll(filepath.Base(ws), "-", "")
	prog := writeProgram(t, mark+".py", `
import os, time
if os.fork() == 0:
    os.setsid()
    time.sleep(2)
    open("survivor.txt", "w").write("x")
    os._exit(0)
print("started", flush=True)
time.sleep(60)
`)
	cmd := exec.Command(bin, "exec", "--workdir", ws, "--timeout", "60s", prog)
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	if n, _ := stdout.Read(buf); !strings.Contains(string(buf[:n]), "started") {
		t.Fatalf("program did not start: %q", buf[:n])
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	deadline := time.Now().Add(2 * time.Second)
	for {
		left := processesWith(mark)
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sandbox processes survived their parent: %v", left)
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(2500 * time.Millisecond)
	if _, err := os.Stat(filepath.Join(ws, "survivor.txt")); err == nil {
		t.Fatalf("a sandboxed process outlived the killed parent")
	}
}

func processesWith(s string) []string {
	entries, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range entries {
		if c, err := os.ReadFile("/proc/" + e.Name() + "/cmdline"); err == nil && strings.Contains(string(c), s) {
			out = append(out, e.Name())
		}
	}
	return out
}

func TestExecManifest(t *testing.T) {
	dir := t.TempDir()
	m := filepath.Join(dir, "agent.yaml")
	if err := os.WriteFile(m, []byte("agent:\n  tools:\n    - name: execute_python\n      timeout: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The manifest's 1 s timeout applies...
	if code, _, errOut := runCLI(t, "", "exec", "--manifest", m, writeProgram(t, "spin.py", "while True: pass")); code != exitTimeout {
		t.Fatalf("exit %d, want the manifest's timeout; stderr %s", code, errOut)
	}
	// ...a flag overrides it...
	if code, _, _ := runCLI(t, "", "exec", "--manifest", m, "--timeout", "5s", writeProgram(t, "ok.py", "import time; time.sleep(1.5); print('done')")); code != 0 {
		t.Fatalf("exit %d with --timeout over the manifest", code)
	}
	// ...and a tool it does not list is refused before it runs, naming the tool.
	code, _, errOut := runCLI(t, "", "exec", "--manifest", m, writeProgram(t, "x.sh", "touch /workspace/ran"))
	if code != exitUsage || !strings.Contains(errOut, "execute_bash") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	// A broken manifest is a usage error with file and line.
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("agent:\n  tools:\n    - name: execute_python\n      timout: 5\n"), 0o644)
	code, _, errOut = runCLI(t, "", "exec", "--manifest", bad, writeProgram(t, "p.py", "print(1)"))
	if code != exitUsage || !strings.Contains(errOut, "bad.yaml:4") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
}
