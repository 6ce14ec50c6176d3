package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/codeagent/codeagent/sandbox/docker"
	"github.com/codeagent/codeagent/sandbox/sandboxtest"
)

// Helpers of the attack tests: the real binary, both backends, and a look
// at the host afterwards. The attack code always runs in the sandbox: it is
// a program that the fake model writes or that `exec` runs.

// runBinary runs the built codeagent in dir with extra environment and
// returns its exit status and output.
func runBinary(t *testing.T, dir string, env []string, args ...string) (int, string, string) {
	t.Helper()
	return runBinaryWith(t, dir, env, nil, args...)
}

// runBinaryWith is runBinary with stdin (nil: none).
func runBinaryWith(t *testing.T, dir string, env []string, stdin io.Reader, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, mcpBinary(t), args...)
	if dir == "" {
		dir = t.TempDir() // run offers its folder to programs: an empty one
	}
	cmd.Dir, cmd.Stdin = dir, stdin
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if cmd.ProcessState == nil {
		t.Fatalf("codeagent %v: %v", args, err)
	}
	return cmd.ProcessState.ExitCode(), out.String(), errb.String()
}

// forBackends runs f once per sandbox backend: the namespace backend, and
// Docker where an engine and the image are there (in CI they must be).
func forBackends(t *testing.T, f func(t *testing.T, backend string)) {
	for _, b := range []string{"namespace", "docker"} {
		t.Run(b, func(t *testing.T) {
			if b == "docker" {
				dockerOrSkip(t)
			}
			f(t, b)
		})
	}
}

func dockerOrSkip(t *testing.T) {
	t.Helper()
	cli, err := docker.Connect("")
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err = docker.Ping(ctx, cli); err == nil {
			_, err = cli.ImageInspect(ctx, docker.DefaultImage)
		}
		cancel()
		cli.Close()
	}
	if err == nil {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("CI is set but the Docker backend cannot run: %v", err)
	}
	t.Skipf("no Docker engine or image: %v", err)
}

// pwn is what an attacker's program does wherever it lands: overwrite
// authorized_keys and leave a file.
const pwn = `open("authorized_keys", "w").write("ssh-ed25519 AAAA attacker\n")
open("pwned", "w").write("x")
print("wrote authorized_keys")
`

func TestAttackRunOutThroughPlantedLink(t *testing.T) {
	forBackends(t, func(t *testing.T, backend string) {
		host, before := sandboxtest.HostDir(t)
		// The program replaces the output directory, inside the workspace,
		// with a link to the host directory and leaves an artifact named
		// after a file there. --out is the directory itself, or a
		// directory below it.
		attack := fmt.Sprintf(`from pathlib import Path
Path("results").rmdir()
Path("results").symlink_to(%q)
Path("authorized_keys").write_text("ssh-ed25519 AAAA attacker\n")
print("done")
`, host)
		for _, out := range []string{"results", "results/sub"} {
			ws := filepath.Join(t.TempDir(), "ws")
			if err := os.MkdirAll(filepath.Join(ws, "results"), 0o755); err != nil {
				t.Fatal(err)
			}
			_, flags := modelServer(t, pyAnswer(attack))
			args := append(append([]string{"run", "--backend", backend}, flags...), "--no-verify", "--workdir", ".", "--out", out, "write a file")
			code, stdout, stderr := runBinary(t, ws, nil, args...)
			sandboxtest.CheckHost(t, host, before)
			if !strings.Contains(stdout, "authorized_keys (") || !strings.Contains(stderr, "symbolic link") {
				t.Errorf("--out %s: no artifact, or no clear refusal (exit %d)\nstdout %s\nstderr %s", out, code, stdout, stderr)
			}
		}
	})
}

func TestAttackWorkdirThroughPlantedLink(t *testing.T) {
	forBackends(t, func(t *testing.T, backend string) {
		host, before := sandboxtest.HostDir(t)
		ws := filepath.Join(t.TempDir(), "ws")
		// Run 1 leaves links to the host directory and to / behind, and
		// tries to remove the mark that makes codeagent distrust them.
		plant := writeProgram(t, "plant.py", fmt.Sprintf(`import os
try:
    os.removexattr(".", "trusted.codeagent.workspace")
    print("mark removed")
except OSError as e:
    print("mark stays:", e.strerror)
os.symlink(%q, "data")
os.symlink("/", "root")
`, host))
		if code, stdout, stderr := runBinary(t, "", nil, "exec", "--backend", backend, "--workdir", ws, plant); code != 0 {
			t.Fatalf("run 1: exit %d\n%s%s", code, stdout, stderr)
		}
		if fi, err := os.Lstat(filepath.Join(ws, "data")); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			t.Fatalf("run 1 left no link: %v", err)
		}
		if _, err := unix.Lgetxattr(ws, "trusted.codeagent.workspace", nil); os.Getuid() == 0 && err != nil {
			t.Errorf("the workspace has lost its mark: %v", err)
		}
		prog := writeProgram(t, "pwn.py", pwn)
		for _, dir := range []string{filepath.Join(ws, "data"), filepath.Join(ws, "root") + host, filepath.Join(ws, "data", "sub")} {
			code, stdout, stderr := runBinary(t, "", nil, "exec", "--backend", backend, "--workdir", dir, prog)
			if code != exitUsage || !strings.Contains(stderr, "symbolic link") {
				t.Errorf("exec --workdir %s: exit %d, want %d and a clear error\nstdout %s\nstderr %s", dir, code, exitUsage, stdout, stderr)
			}
			sandboxtest.CheckHost(t, host, before)
		}
		srv, flags := modelServer(t, pyAnswer(pwn))
		args := append(append([]string{"run", "--backend", backend}, flags...), "--no-verify", "--workdir", filepath.Join(ws, "data"), "write a file")
		code, stdout, stderr := runBinary(t, "", nil, args...)
		if code != exitUsage || !strings.Contains(stderr, "symbolic link") {
			t.Errorf("run --workdir: exit %d, want %d and a clear error\nstdout %s\nstderr %s", code, exitUsage, stdout, stderr)
		}
		if n := len(srv.Requests()); n != 0 {
			t.Errorf("the model was asked %d time(s) before the refusal", n)
		}
		sandboxtest.CheckHost(t, host, before)
	})
}

func TestAttackSessionWorkspaceThroughPlantedLink(t *testing.T) {
	forBackends(t, func(t *testing.T, backend string) {
		host, before := sandboxtest.HostDir(t)
		data := filepath.Join(t.TempDir(), "data")
		// A program that ran with the data directory as its workspace
		// replaces a session's workspace with a link to the host.
		plant := writeProgram(t, "plant.py", fmt.Sprintf(`import os
os.makedirs("sessions/s1")
os.symlink(%q, "sessions/s1/workspace")
`, host))
		if code, stdout, stderr := runBinary(t, "", nil, "exec", "--backend", backend, "--workdir", data, plant); code != 0 {
			t.Fatalf("run 1: exit %d\n%s%s", code, stdout, stderr)
		}
		// Private, as a data directory must be (else it is refused for
		// that first): the link is what is tried here.
		if err := os.Chmod(data, 0o700); err != nil {
			t.Fatal(err)
		}
		_, flags := modelServer(t, pyAnswer(pwn))
		args := append(append([]string{"run", "--backend", backend, "--data-dir", data, "--session", "s1"}, flags...), "--no-verify", "write a file")
		code, stdout, stderr := runBinary(t, "", nil, args...)
		if code != exitUsage || !strings.Contains(stderr, "symbolic link") {
			t.Errorf("run --session: exit %d, want %d and a clear error\nstdout %s\nstderr %s", code, exitUsage, stdout, stderr)
		}
		sandboxtest.CheckHost(t, host, before)
	})
}

func TestAttackTempDirThroughPlantedLink(t *testing.T) {
	forBackends(t, func(t *testing.T, backend string) {
		host, before := sandboxtest.HostDir(t)
		w := filepath.Join(t.TempDir(), "w")
		plant := writeProgram(t, "plant.py", fmt.Sprintf("import os\nos.symlink(%q, 'tmp')\n", host))
		if code, stdout, stderr := runBinary(t, "", nil, "exec", "--backend", backend, "--workdir", w, plant); code != 0 {
			t.Fatalf("run 1: exit %d\n%s%s", code, stdout, stderr)
		}
		// Temporary workspaces, MCP sessions and the backends' own state
		// live in $TMPDIR, which passes through the planted link.
		env := []string{"TMPDIR=" + filepath.Join(w, "tmp")}
		prog := writeProgram(t, "pwn.py", pwn)
		for _, args := range [][]string{{"exec", "--backend", backend, prog}, {"mcp", "--backend", backend}} {
			code, stdout, stderr := runBinary(t, "", env, args...)
			if code != exitUsage || !strings.Contains(stderr, "symbolic link") {
				t.Errorf("%s: exit %d, want %d and a clear error\nstdout %s\nstderr %s", args[0], code, exitUsage, stdout, stderr)
			}
			sandboxtest.CheckHost(t, host, before)
		}
	})
}

// read_file follows no link at any component of its path, not even one
// that stays inside the workspace.
func TestMCPReadFileFollowsNoLink(t *testing.T) {
	c := startMCP(t)
	code := "import os\nos.mkdir('real')\nopen('real/x.txt', 'w').write('inside')\nos.symlink('real', 'inner')\n"
	if res := c.call(t, "execute_code", map[string]any{"language": "python", "code": code}, nil); res.IsError {
		t.Fatalf("execute_code: %s", toolText(res))
	}
	var rd struct{ Content string }
	if res := c.call(t, "read_file", map[string]any{"path": "real/x.txt"}, &rd); res.IsError || rd.Content != "inside" {
		t.Fatalf("read_file: %s", toolText(res))
	}
	res := c.call(t, "read_file", map[string]any{"path": "inner/x.txt"}, nil)
	if text := toolText(res); !res.IsError || !strings.Contains(text, "symbolic link") {
		t.Errorf("read_file through a link: error %v, %.300s", res.IsError, text)
	}
}
