package main

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/codeagent/codeagent/sandbox/backends"
)

// setuidAttack is what a program does to leave a setuid or setgid file on
// the host: a copy of a shell marked 4755, 2755 and 6755 (by chmod(2) and by
// chmod(1)), a file created with those bits, a setgid directory, and the
// workspace opened to every user. It prints the workspace's host path as
// /proc/self/mountinfo tells it, and what each attempt gave.
const setuidAttack = `import os, shutil, subprocess
shutil.copy('/bin/sh', 'sh')
for mode in (0o4755, 0o2755, 0o6755):
    try:
        os.chmod('sh', mode)
        print('chmod', oct(mode), 'allowed')
    except OSError as e:
        print('chmod', oct(mode), 'refused', e.errno)
print('chmod(1):', subprocess.run(['chmod', 'u+s,g+s', 'sh']).returncode)
try:
    os.close(os.open('created', os.O_CREAT | os.O_WRONLY, 0o6755))
    print('create allowed')
except OSError as e:
    print('create refused', e.errno)
try:
    os.mkdir('sgid', 0o2777)
    print('mkdir allowed')
except OSError as e:
    print('mkdir refused', e.errno)
os.chmod('.', 0o755)
for line in open('/proc/self/mountinfo'):
    f = line.split()
    if f[4] == '/workspace':
        print('WS=' + f[3])
`

// assertNoSetID fails if any file below dir is setuid or setgid, carries
// file capabilities, or (when codeagent runs as root) was left owned by a
// host account, or by root with write access for others.
func assertNoSetID(t *testing.T, dir string, programFiles ...string) {
	t.Helper()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		if fi.Mode()&(fs.ModeSetuid|fs.ModeSetgid) != 0 {
			t.Errorf("%s is %v on the host", p, fi.Mode())
		}
		if n, _ := unix.Lgetxattr(p, "security.capability", make([]byte, 64)); n > 0 {
			t.Errorf("%s has file capabilities", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() != 0 {
		return
	}
	accounts := hostAccountUIDs(t)
	for _, name := range programFiles {
		fi, err := os.Lstat(filepath.Join(dir, name))
		if err != nil {
			continue
		}
		uid := fi.Sys().(*syscall.Stat_t).Uid
		switch {
		case uid == 0 && fi.Mode()&0o022 != 0:
			t.Errorf("%s, made by the program, belongs to root and is writable by others (%v)", name, fi.Mode())
		case uid != 0 && accounts[uid]:
			t.Errorf("%s, made by the program, belongs to host uid %d, an account of this host", name, uid)
		}
	}
}

func hostAccountUIDs(t *testing.T) map[uint32]bool {
	f, err := os.Open("/etc/passwd")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[uint32]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Split(sc.Text(), ":")
		if len(fields) > 2 {
			if uid, err := strconv.ParseUint(fields[2], 10, 32); err == nil {
				out[uint32(uid)] = true
			}
		}
	}
	return out
}

// wantRefused checks the attack's report lines: every attempt refused.
func wantRefused(t *testing.T, out string) {
	t.Helper()
	n := 0
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "chmod 0o") && !strings.HasPrefix(line, "create ") && !strings.HasPrefix(line, "mkdir ") {
			continue
		}
		n++
		if !strings.Contains(line, "refused") {
			t.Errorf("not refused: %s", line)
		}
	}
	if n != 5 {
		t.Errorf("%d attempts reported, want 5:\n%s", n, out)
	}
}

// TestSetuidThroughExecWorkdir attacks through `exec --workdir` on both
// backends and checks the host's copy of the workspace.
func TestSetuidThroughExecWorkdir(t *testing.T) {
	for _, backend := range []string{"namespace", "docker"} {
		t.Run(backend, func(t *testing.T) {
			if backend == "docker" {
				requireDocker(t)
			}
			dir := filepath.Join(t.TempDir(), "ws")
			code, out, errOut := runCLI(t, "", "exec", "--backend", backend, "--workdir", dir, writeProgram(t, "a.py", setuidAttack))
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			wantRefused(t, out)
			assertNoSetID(t, dir, "sh", "created", "sgid")
		})
	}
}

// setuidAttackChecked is the attack in the plain pathlib the static checker
// lets through: the checker is a filter, the sandbox has to hold.
const setuidAttackChecked = `from pathlib import Path
p = Path('sh')
p.write_bytes(b'#!/bin/sh\nid\n')
for mode in (0o4755, 0o2755, 0o6755):
    try:
        p.chmod(mode)
        print('chmod', oct(mode), 'allowed')
    except OSError as e:
        print('chmod', oct(mode), 'refused', e.errno)
try:
    Path('created').touch(mode=0o6755)
    print('create allowed')
except OSError as e:
    print('create refused', e.errno)
try:
    Path('sgid').mkdir(mode=0o2777)
    print('mkdir allowed')
except OSError as e:
    print('mkdir refused', e.errno)
`

// TestSetuidThroughRun has the model write the attack, as an agent would.
func TestSetuidThroughRun(t *testing.T) {
	_, model := modelServer(t, pyAnswer(setuidAttackChecked))
	dir := filepath.Join(t.TempDir(), "ws")
	args := append([]string{"run", "--workdir", dir, "--no-verify"}, model...)
	code, out, errOut := runCLI(t, "", append(args, "leave a setuid shell")...)
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, out, errOut)
	}
	wantRefused(t, out)
	assertNoSetID(t, dir, "sh", "created", "sgid")
}

// TestSetuidThroughMCP attacks an MCP session's workspace, a directory in
// the system's temporary directory that other users may reach.
func TestSetuidThroughMCP(t *testing.T) {
	c := startMCP(t)
	var out struct {
		Status string `json:"status"`
		Stdout string `json:"stdout"`
	}
	if res := c.call(t, "execute_code", map[string]any{"language": "python", "code": setuidAttack}, &out); res.IsError || out.Status != "ok" {
		t.Fatalf("execute_code: %+v %s", out, toolText(res))
	}
	wantRefused(t, out.Stdout)
	// The program may see its host path in mountinfo (a bind) or not (an
	// overlay, as root); the host's side is the session's workspace in the
	// server's temporary directory either way.
	found, err := filepath.Glob(filepath.Join(c.tmp, "codeagent-mcp-*"))
	if err != nil || len(found) != 1 {
		t.Fatalf("the MCP session's workspace in %s: %v %v (the program saw %q)", c.tmp, found, err, out.Stdout)
	}
	ws := found[0]
	assertNoSetID(t, ws, "sh", "created", "sgid")
}

// requireDocker skips the test when the Docker backend cannot run here,
// unless CI is set (CI starts an engine and builds the image).
func requireDocker(t *testing.T) {
	t.Helper()
	sb, err := backends.Open("docker", backends.Options{})
	if err == nil {
		_ = sb.Close()
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("CI is set but the Docker backend cannot run: %v", err)
	}
	t.Skipf("no Docker backend here: %v", err)
}
