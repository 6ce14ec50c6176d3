package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// invoker runs the real binary as root (uid 0) or as an unprivileged user,
// on one backend.
type invoker struct {
	uid     int
	bin     string // the binary, where the user may run it
	home    string
	backend string
}

// invokers are the ways a user runs codeagent here: as root on the
// namespace backend and on Docker, and as an unprivileged user on the
// namespace backend (Docker's socket is root's).
func invokers(t *testing.T) []invoker {
	t.Helper()
	list := []invoker{{backend: "namespace"}, {backend: "docker"}}
	if os.Geteuid() != 0 {
		return list
	}
	base := userDir(t, 1500)
	bin := filepath.Join(base, "codeagent")
	data, err := os.ReadFile(mcpBinary(t))
	if err == nil {
		err = os.WriteFile(bin, data, 0o755)
	}
	if err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(base, "home")
	os.Mkdir(home, 0o700)
	os.Chown(home, 1500, 1500)
	return append(list, invoker{uid: 1500, bin: bin, home: home, backend: "namespace"})
}

func (iv invoker) name() string {
	if iv.uid != 0 {
		return iv.backend + "-unprivileged"
	}
	return iv.backend
}

// userDir is a new directory owned by uid, in a temporary directory the
// user can reach.
func userDir(t *testing.T, uid int) string {
	t.Helper()
	base, err := os.MkdirTemp("", "codeagent-apply-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(base, uid, uid); err != nil {
		t.Fatal(err)
	}
	return base
}

// own gives the tree at dir to the invoker's user.
func (iv invoker) own(t *testing.T, dir string) {
	t.Helper()
	if iv.uid == 0 {
		return
	}
	err := filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err == nil {
			err = os.Lchown(p, iv.uid, iv.uid)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// command is the binary with args, in dir, as the invoker's user.
func (iv invoker) command(ctx context.Context, t *testing.T, dir string, args ...string) *exec.Cmd {
	t.Helper()
	if len(args) > 0 && (args[0] == "run" || args[0] == "exec" || args[0] == "repl") {
		args = append([]string{args[0], "--backend", iv.backend}, args[1:]...)
	}
	if iv.uid == 0 {
		cmd := exec.CommandContext(ctx, mcpBinary(t), args...)
		cmd.Dir, cmd.Env = dir, os.Environ()
		return cmd
	}
	cmd := exec.CommandContext(ctx, iv.bin, args...)
	cmd.Dir, cmd.Env = dir, []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + iv.home, "TMPDIR=" + iv.home}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(iv.uid), Gid: uint32(iv.uid), Groups: []uint32{}}}
	return cmd
}

// run runs the binary to its end (3 minutes at most).
func (iv invoker) run(t *testing.T, dir string, args ...string) (int, string, string) {
	t.Helper()
	return iv.runStdin(t, dir, "", args...)
}

// runStdin is run with stdin.
func (iv invoker) runStdin(t *testing.T, dir, stdin string, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := iv.command(ctx, t, dir, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("codeagent %s: timed out\n%s%s", strings.Join(args, " "), out.String(), errb.String())
	}
	if err != nil && cmd.ProcessState == nil {
		t.Fatalf("codeagent %s: %v", strings.Join(args, " "), err)
	}
	return cmd.ProcessState.ExitCode(), out.String(), errb.String()
}

// forInvokers runs f for each invoker, Docker only where it runs.
func forInvokers(t *testing.T, f func(t *testing.T, iv invoker)) {
	for _, iv := range invokers(t) {
		t.Run(iv.name(), func(t *testing.T) {
			if iv.backend == "docker" {
				dockerOrSkip(t)
			}
			f(t, iv)
		})
	}
}

// plantFolder is a user's project: a git repository holding a nested one
// (vendored) and a submodule, with an .npmrc of theirs.
func plantFolder(t *testing.T, iv invoker) (dir, data string) {
	t.Helper()
	base := userDir(t, iv.uid)
	dir, data = filepath.Join(base, "project"), filepath.Join(base, "data")
	for rel, text := range map[string]string{
		"sales.csv": runSalesCSV, ".git/HEAD": "ref: refs/heads/main\n", ".git/config": "[core]\n\tbare = false\n",
		"vendor/lib/.git/HEAD": "ref: refs/heads/main\n", "vendor/lib/.git/config": "[core]\n\tbare = false\n",
		"vendor/lib/.git/hooks/README": "hooks\n", "mod/.git": "gitdir: ../.git/modules/mod\n", "mod/x.txt": "x\n",
	} {
		p := filepath.Join(dir, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.Mkdir(data, 0o700)
	iv.own(t, base)
	return dir, data
}

// plantProgram plants, from the sandbox, what a host tool would run or load
// at the user's next git, npm, cd or editor start, and one honest output.
const plantProgram = `from pathlib import Path
def put(p, text, mode=0o644):
    Path(p).parent.mkdir(parents=True, exist_ok=True)
    Path(p).write_text(text)
    Path(p).chmod(mode)
put("vendor/lib/.git/config", "[core]\n\tfsmonitor = touch /tmp/codeagent-test-pwned\n")
put("vendor/lib/.git/hooks/pre-commit", "#!/bin/sh\ntouch /tmp/codeagent-test-pwned\n", 0o755)
put("mod/.git", "gitdir: ../somewhere\n")
put(".npmrc", "script-shell=./.tools.sh\n")
put(".tools.sh", "#!/bin/sh\ntouch /tmp/codeagent-test-pwned\n", 0o755)
put(".env", "API_KEY=planted\n")
put("id_rsa", "-----BEGIN OPENSSH PRIVATE KEY-----\nplanted\n")
put(".envrc", "touch /tmp/codeagent-test-pwned\n")
put(".vscode/tasks.json", '{"version": "2.0.0", "tasks": [{"label": "x", "type": "shell", "command": "touch /tmp/codeagent-test-pwned", "runOptions": {"runOn": "folderOpen"}}]}\n')
put("report\u200b.txt", "looks like report.txt\n")
put("report.txt", "total 245.50\n")
print("done")
`

// A program plants files for the host's tools (the reproductions of issue
// 44: a nested repository's config with core.fsmonitor and its hook, a
// submodule's .git file, an .npmrc with a script shell and the shell,
// .env, id_rsa, .envrc, VS Code's tasks). run --apply applies none of it,
// nor, all or none, the honest report; each is named with its reason and
// the set is kept; the report alone applies when named; a refused name
// applies when the person names it, .git never. As root and unprivileged,
// on the namespace backend and Docker.
func TestAttackRunInFolderPlantsForTheHost(t *testing.T) {
	forInvokers(t, func(t *testing.T, iv invoker) {
		dir, data := plantFolder(t, iv)
		before := treeLook(t, dir)
		_, flags := modelServer(t, pyAnswer(plantProgram))
		code, stdout, stderr := iv.run(t, dir, append(append([]string{"run", "--data-dir", data, "--apply"}, flags...),
			"--no-verify", "write report.txt")...)
		if code != exitFailure {
			t.Fatalf("run --apply: exit %d, want 1 (nothing applied)\n%s%s", code, stdout, stderr)
		}
		if after := treeLook(t, dir); after != before {
			t.Fatalf("the folder changed:\nbefore:\n%safter:\n%s", before, after)
		}
		for _, rel := range []string{"vendor/lib/.git/config", "vendor/lib/.git/hooks/pre-commit", "mod/.git"} {
			if !strings.Contains(stdout, "skipped  "+rel+": git's files (.git) are read-only") {
				t.Errorf("stdout does not list %s as skipped:\n%s", rel, stdout)
			}
		}
		for _, rel := range []string{".npmrc", ".tools.sh", ".env", "id_rsa", ".envrc", ".vscode/tasks.json"} {
			if !strings.Contains(stderr, "not applied: "+rel+": ") {
				t.Errorf("stderr does not name %s as refused:\n%s", rel, stderr)
			}
		}
		// A name that looks like another is listed escaped, never raw.
		if !strings.Contains(stdout, `added    report\u200b.txt (`) || strings.Contains(stdout+stderr, "report\u200b") {
			t.Errorf("the name with an invisible character is not shown escaped:\n%s%s", stdout, stderr)
		}
		m := keptRE.FindStringSubmatch(stderr)
		if m == nil || !strings.Contains(stderr, "nothing was applied") {
			t.Fatalf("no kept set, or no word that nothing was applied:\n%s", stderr)
		}
		id := m[1]
		// The report alone, named.
		code, stdout, stderr = iv.run(t, dir, "changes", "apply", "--data-dir", data, id, "report.txt")
		if code != 0 || !strings.Contains(stdout, "applied  added    report.txt") {
			t.Errorf("changes apply ID report.txt: exit %d\n%s%s", code, stdout, stderr)
		}
		// .git cannot be named; a refused name can.
		if code, _, stderr = iv.run(t, dir, "changes", "apply", "--data-dir", data, "--apply-sensitive", "mod/.git", id); code != exitUsage {
			t.Errorf("--apply-sensitive mod/.git: exit %d, want 2\n%s", code, stderr)
		}
		code, stdout, stderr = iv.run(t, dir, "changes", "apply", "--data-dir", data, "--apply-sensitive", ".envrc", id, ".envrc")
		if code != 0 || !strings.Contains(stdout, "applied  added    .envrc") {
			t.Errorf("--apply-sensitive .envrc: exit %d\n%s%s", code, stdout, stderr)
		}
		// The folder: the report and the named .envrc, nothing else.
		for rel, want := range map[string]string{"report.txt": "total 245.50\n", ".envrc": "touch /tmp/codeagent-test-pwned\n",
			"vendor/lib/.git/config": "[core]\n\tbare = false\n", "mod/.git": "gitdir: ../.git/modules/mod\n"} {
			if b, err := os.ReadFile(filepath.Join(dir, rel)); err != nil || string(b) != want {
				t.Errorf("%s = %q, %v; want %q", rel, b, err, want)
			}
		}
		for _, rel := range []string{"vendor/lib/.git/hooks/pre-commit", ".npmrc", ".tools.sh", ".env", "id_rsa", ".vscode", "report\u200b.txt"} {
			if _, err := os.Lstat(filepath.Join(dir, rel)); err == nil {
				t.Errorf("%s reached the folder", rel)
			}
		}
		if _, err := os.Stat("/tmp/codeagent-test-pwned"); err == nil {
			t.Error("/tmp/codeagent-test-pwned exists")
		}
	})
}

// The same plants from a program that exec runs in the folder, and from a
// repl's cell: exec --apply and repl --apply go through the same checks,
// and land none of them (nor, all or none, the honest report), exiting 1
// as run does. As root and unprivileged, on the
// namespace backend and Docker.
func TestAttackExecInFolderPlantsForTheHost(t *testing.T) {
	forInvokers(t, func(t *testing.T, iv invoker) {
		for _, door := range []string{"exec", "repl"} {
			t.Run(door, func(t *testing.T) { attackPlantsThrough(t, iv, door) })
		}
	})
}

// attackPlantsThrough runs plantProgram in a planted folder through exec
// (the program's file beside the folder) or repl (one cell running the
// folder's copy of it) with --apply, and checks that nothing landed.
func attackPlantsThrough(t *testing.T, iv invoker, door string) {
	dir, data := plantFolder(t, iv)
	prog := filepath.Join(filepath.Dir(dir), "plant.py")
	if door == "repl" {
		prog = filepath.Join(dir, "plant.py") // the cell runs the folder's copy
	}
	if err := os.WriteFile(prog, []byte(plantProgram), 0o644); err != nil {
		t.Fatal(err)
	}
	iv.own(t, prog)
	before := treeLook(t, dir)
	args, stdin := []string{"exec", "--data-dir", data, "--apply", prog}, ""
	if door == "repl" {
		args, stdin = []string{"repl", "--data-dir", data, "--apply"}, "exec(open('plant.py').read())\n"
	}
	code, stdout, stderr := iv.runStdin(t, dir, stdin, args...)
	if code != exitFailure {
		t.Errorf("%s --apply: exit %d, want 1 (nothing applied)\n%s%s", door, code, stdout, stderr)
	}
	if after := treeLook(t, dir); after != before {
		t.Fatalf("the folder changed:\nbefore:\n%safter:\n%s", before, after)
	}
	out := stdout + stderr
	for _, rel := range []string{"vendor/lib/.git/config", "vendor/lib/.git/hooks/pre-commit", "mod/.git"} {
		if !strings.Contains(out, "skipped  "+rel+": git's files (.git) are read-only") {
			t.Errorf("the output does not list %s as skipped:\n%s", rel, out)
		}
	}
	for _, rel := range []string{".npmrc", ".tools.sh", ".env", "id_rsa", ".envrc", ".vscode/tasks.json"} {
		if !strings.Contains(out, "not applied: "+rel+": ") {
			t.Errorf("the output does not name %s as refused:\n%s", rel, out)
		}
	}
	if !strings.Contains(out, "nothing was applied") {
		t.Errorf("no word that nothing was applied:\n%s", out)
	}
}

// A killed apply leaves each file old or new, never torn, and applying
// again finishes it: what landed is recognised, not a conflict, and the
// killed process's temporary files go.
func TestKilledApplyIsResumed(t *testing.T) {
	forInvokers(t, func(t *testing.T, iv invoker) {
		if iv.backend == "docker" {
			t.Skip("the apply is the same on every backend: the namespace backend's runs make the set")
		}
		const n, size = 3000, 16 << 10
		base := userDir(t, iv.uid)
		dir, data := filepath.Join(base, "project"), filepath.Join(base, "data")
		os.MkdirAll(filepath.Join(dir, "data"), 0o755)
		os.Mkdir(data, 0o700)
		old, changed := bytes.Repeat([]byte("o"), size), bytes.Repeat([]byte("n"), size)
		for i := range n {
			if err := os.WriteFile(filepath.Join(dir, "data", fmt.Sprintf("f%04d.txt", i)), old, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		iv.own(t, base)
		prog := fmt.Sprintf("from pathlib import Path\nfor p in sorted(Path('data').iterdir()):\n    p.write_text('n' * %d)\nfor i in range(50):\n    Path('new%%02d.txt' %% i).write_text('n' * %d)\nprint('done')\n", size, size)
		_, flags := modelServer(t, pyAnswer(prog))
		code, stdout, stderr := iv.run(t, dir, append(append([]string{"run", "--data-dir", data}, flags...), "--no-verify", "rewrite the data")...)
		m := keptRE.FindStringSubmatch(stderr)
		if code != 0 || m == nil {
			t.Fatalf("run: exit %d\n%s%s", code, stdout, stderr)
		}
		id := m[1]
		// Kill the apply once the first files have landed.
		killApplyMidway(t, iv, dir, data, id)
		counts := map[string]int{}
		entries, _ := os.ReadDir(filepath.Join(dir, "data"))
		for _, e := range entries {
			b, err := os.ReadFile(filepath.Join(dir, "data", e.Name()))
			switch {
			case strings.HasPrefix(e.Name(), ".codeagent-apply-"):
				counts["temporary"]++
			case err != nil:
				t.Fatal(err)
			case bytes.Equal(b, old):
				counts["old"]++
			case bytes.Equal(b, changed):
				counts["new"]++
			default:
				t.Fatalf("%s is torn: %d bytes, neither old nor new", e.Name(), len(b))
			}
		}
		if counts["old"]+counts["new"] != n || counts["new"] == 0 || counts["old"] == 0 {
			t.Fatalf("after the kill: %v; want %d files, some old and some new", counts, n)
		}
		code, stdout, stderr = iv.run(t, dir, "changes", "apply", "--data-dir", data, id)
		if code != 0 || !strings.Contains(stdout, "already  modified data/f0000.txt (found applied)") || strings.Contains(stderr, "not applied") {
			t.Fatalf("applying again: exit %d\n%s%s", code, stdout[:min(len(stdout), 2000)], stderr)
		}
		entries, _ = os.ReadDir(filepath.Join(dir, "data"))
		for _, e := range entries {
			if b, _ := os.ReadFile(filepath.Join(dir, "data", e.Name())); !bytes.Equal(b, changed) {
				t.Errorf("%s is not the new contents after the resumed apply", e.Name())
			}
		}
		if len(entries) != n {
			t.Errorf("data holds %d entries, want %d (temporary files left?)", len(entries), n)
		}
		if b, _ := os.ReadFile(filepath.Join(dir, "new49.txt")); !bytes.Equal(b, changed) {
			t.Error("new49.txt was not applied")
		}
		if _, _, stderr = iv.run(t, dir, "changes", "diff", "--data-dir", data, id); !strings.Contains(stderr, "no kept changes") {
			t.Errorf("the applied set is still kept: %s", stderr)
		}
	})
}

// killApplyMidway starts `changes apply id` and SIGKILLs it when its tenth
// file has been renamed into place in dir/data (inotify), within a minute.
func killApplyMidway(t *testing.T, iv invoker, dir, data, id string) {
	t.Helper()
	fd, err := syscall.InotifyInit1(syscall.IN_CLOEXEC | syscall.IN_NONBLOCK)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	if _, err := syscall.InotifyAddWatch(fd, filepath.Join(dir, "data"), syscall.IN_MOVED_TO); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := iv.command(ctx, t, dir, "changes", "apply", "--data-dir", data, id)
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	landed := 0
	buf := make([]byte, 64<<10)
	for landed < 10 {
		k, err := syscall.Read(fd, buf)
		if err == syscall.EAGAIN && ctx.Err() == nil {
			time.Sleep(200 * time.Microsecond)
			continue
		}
		if err != nil {
			cmd.Process.Kill()
			t.Fatalf("waiting for the apply's first files: %v", err)
		}
		for off := 0; off+syscall.SizeofInotifyEvent <= k; {
			n := int(binary.NativeEndian.Uint32(buf[off+12:])) // the name's length
			name := strings.TrimRight(string(buf[off+syscall.SizeofInotifyEvent:off+syscall.SizeofInotifyEvent+n]), "\x00")
			if !strings.HasPrefix(name, ".codeagent-apply-") {
				landed++
			}
			off += syscall.SizeofInotifyEvent + n
		}
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("the apply ended before it was killed: %v", cmd.ProcessState)
	}
}

// Kept change sets do not pile up: rm takes several IDs (none removed when
// one is unknown), prune drops those older than an age, or all.
func TestChangesRmAndPrune(t *testing.T) {
	dir, data := t.TempDir(), t.TempDir()
	var ids []string
	for i := range 3 {
		_, flags := modelServer(t, pyAnswer(fmt.Sprintf("open('out%d.txt', 'w').write('x')\nprint('ok')\n", i)))
		code, stdout, stderr := runBinary(t, dir, nil, append(append([]string{"run", "--data-dir", data}, flags...), "--no-verify", "write a file")...)
		m := keptRE.FindStringSubmatch(stderr)
		if code != 0 || m == nil {
			t.Fatalf("run %d: exit %d\n%s%s", i, code, stdout, stderr)
		}
		ids = append(ids, m[1])
	}
	if code, _, stderr := runBinary(t, "", nil, "changes", "rm", "--data-dir", data, ids[0], "20200101-000000-abcdef"); code != exitUsage {
		t.Errorf("rm with an unknown ID: exit %d\n%s", code, stderr)
	}
	code, stdout, stderr := runBinary(t, "", nil, "changes", "rm", "--data-dir", data, ids[0], ids[1])
	if code != 0 || !strings.Contains(stdout, "removed "+ids[0]) || !strings.Contains(stdout, "removed "+ids[1]) {
		t.Errorf("rm A B: exit %d\n%s%s", code, stdout, stderr)
	}
	if code, stdout, _ = runBinary(t, "", nil, "changes", "prune", "--data-dir", data, "--older-than", "1h"); code != 0 || strings.Contains(stdout, ids[2]) {
		t.Errorf("prune --older-than 1h removed a new set: exit %d\n%s", code, stdout)
	}
	if code, stdout, _ = runBinary(t, "", nil, "changes", "list", "--data-dir", data); code != 0 || strings.Contains(stdout, ids[0]) || !strings.Contains(stdout, ids[2]) {
		t.Errorf("list after rm: exit %d\n%s", code, stdout)
	}
	if code, stdout, _ = runBinary(t, "", nil, "changes", "prune", "--data-dir", data); code != 0 || !strings.Contains(stdout, "removed "+ids[2]) {
		t.Errorf("prune: exit %d\n%s", code, stdout)
	}
	if entries, _ := os.ReadDir(filepath.Join(data, "changes")); len(entries) != 0 {
		t.Errorf("left in the data directory: %v", entries)
	}
}

// The user's own solution.py and test_solution.py are theirs: a run in the
// folder, applied, leaves them as they were and never lists them, while
// its program (which reads the user's solution.py as data) runs from
// codeagent's own directory. As root and unprivileged, on the namespace
// backend and Docker.
func TestRunLeavesTheUsersSolution(t *testing.T) {
	forInvokers(t, func(t *testing.T, iv invoker) {
		base := userDir(t, iv.uid)
		dir, data := filepath.Join(base, "project"), filepath.Join(base, "data")
		os.Mkdir(dir, 0o755)
		os.Mkdir(data, 0o700)
		mine := map[string]string{"solution.py": "print('the user's own program')\n", "test_solution.py": "def test_mine(): pass\n"}
		for name, text := range mine {
			os.WriteFile(filepath.Join(dir, name), []byte(text), 0o640)
		}
		iv.own(t, base)
		prog := "from pathlib import Path\nPath('lines.txt').write_text(str(len(Path('solution.py').read_text().splitlines())) + '\\n')\nprint(Path(__file__).parent.name)\n"
		_, flags := modelServer(t, pyAnswer(prog))
		code, stdout, stderr := iv.run(t, dir, append(append([]string{"run", "--data-dir", data, "--apply"}, flags...), "--no-verify", "count the lines of solution.py")...)
		if code != 0 || !strings.Contains(stdout, "── output ──\n.codeagent\n") || !strings.Contains(stdout, "added    lines.txt") {
			t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
		}
		for name, text := range mine {
			if b, err := os.ReadFile(filepath.Join(dir, name)); err != nil || string(b) != text {
				t.Errorf("the user's %s = %q, %v", name, b, err)
			}
		}
		if strings.Contains(stdout, "solution.py (") {
			t.Errorf("the change list offers a solution.py:\n%s", stdout)
		}
		if b, _ := os.ReadFile(filepath.Join(dir, "lines.txt")); string(b) != "1\n" {
			t.Errorf("lines.txt = %q: the program did not read the user's solution.py", b)
		}
	})
}
