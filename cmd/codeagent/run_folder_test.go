package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// folderProgram is what the scripted model answers for a task in a
// folder: it reads sales.csv in place, writes a report, appends to the
// user's notes and removes old.txt.
const folderProgram = `import csv
from pathlib import Path
rows = list(csv.DictReader(open("sales.csv")))
total = sum(int(r["units"]) * float(r["unit_price"]) for r in rows)
open("report.txt", "w").write(f"total {total:.2f}\n")
open("notes.txt", "a").write("checked\n")
Path("old.txt").unlink()
print("done")
`

// userFolder is a project folder as a user has it, with the current
// directory of the run in it.
func userFolder(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for rel, data := range map[string]string{"sales.csv": runSalesCSV, "notes.txt": "todo\n", "old.txt": "old\n",
		"sub/keep.txt": "keep\n", ".git/HEAD": "ref: refs/heads/main\n", ".env": "API_KEY=sk-folder-secret\n"} {
		p := filepath.Join(dir, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(data), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// treeLook is everything a user would notice of a folder: each entry's
// owner, mode, size, modification time and contents, and the folder's
// own attributes.
func treeLook(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		rel, _ := filepath.Rel(dir, p)
		fmt.Fprintf(&b, "%s %d:%d %v %d %d", rel, st.Uid, st.Gid, fi.Mode(), fi.Size(), fi.ModTime().UnixNano())
		if fi.Mode().IsRegular() {
			data, _ := os.ReadFile(p)
			fmt.Fprintf(&b, " %q", data)
		}
		b.WriteString("\n")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = unix.Lgetxattr(dir, "trusted.codeagent.workspace", nil)
	fmt.Fprintf(&b, "marked: %v\n", err == nil)
	return b.String()
}

var keptRE = regexp.MustCompile(`codeagent changes apply ([0-9]{8}-[0-9]{6}-[0-9a-f]{6})`)

// Without a terminal and without --apply, a run in a folder reads its
// files in place and leaves it exactly as it was; its changes are listed
// and kept, and `changes apply` brings them later, refusing a file the
// user changed meanwhile.
func TestRunInFolderKeepsChangesUntilApplied(t *testing.T) {
	dir := userFolder(t)
	data := t.TempDir()
	before := treeLook(t, dir)
	srv, flags := modelServer(t, pyAnswer(folderProgram))
	code, stdout, stderr := runBinary(t, dir, nil, append(append([]string{"run", "--data-dir", data}, flags...),
		"--no-verify", "--diff", "Sum the revenue in sales.csv into report.txt")...)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	// The model is told the folder's files, but not of .env, which is
	// held back and named.
	if req := srv.Requests()[0].Text(); !strings.Contains(req, "sales.csv") || !strings.Contains(req, "| date,product") ||
		strings.Contains(req, ".env") || strings.Contains(req, "sk-folder-secret") {
		t.Errorf("the model's first request:\n%s", req)
	}
	if !strings.Contains(stderr, "not offered to the program, as they may hold secrets: .env") {
		t.Errorf("stderr does not name the held-back .env:\n%s", stderr)
	}
	if after := treeLook(t, dir); after != before {
		t.Fatalf("the folder changed without being told:\nbefore:\n%safter:\n%s", before, after)
	}
	for _, want := range []string{"── changes to " + dir, "added    report.txt", "modified notes.txt", "deleted  old.txt",
		"+total 245.50", "+checked"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout, "sub/keep.txt") || strings.Contains(stdout, "sales.csv (") {
		t.Errorf("unchanged files listed as changes:\n%s", stdout)
	}
	m := keptRE.FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("no command to apply the kept changes:\n%s", stderr)
	}
	id := m[1]
	// The line says where they are kept and how to drop them too.
	if !strings.Contains(stderr, "kept in "+filepath.Join(data, "changes", id)) || !strings.Contains(stderr, "'codeagent changes rm "+id+"' drops them") {
		t.Errorf("the kept line does not say where the changes are or how to drop them:\n%s", stderr)
	}
	code, stdout, stderr = runBinary(t, "", nil, "changes", "list", "--data-dir", data)
	if code != 0 || !strings.Contains(stdout, id) || !strings.Contains(stdout, dir) {
		t.Errorf("changes list: exit %d\n%s%s", code, stdout, stderr)
	}
	// The user goes on working: notes.txt changes in the folder.
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("todo\nmine\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	// All or none: the conflict on notes.txt applies nothing.
	mine := treeLook(t, dir)
	code, stdout, stderr = runBinary(t, "", nil, "changes", "apply", "--data-dir", data, id)
	if code != 1 || !strings.Contains(stderr, "not applied: notes.txt: it changed in the folder since the run started") ||
		!strings.Contains(stderr, "nothing was applied") {
		t.Errorf("changes apply: exit %d, want 1 naming notes.txt\n%s%s", code, stdout, stderr)
	}
	if after := treeLook(t, dir); after != mine {
		t.Fatalf("a refused apply changed the folder:\nbefore:\n%safter:\n%s", mine, after)
	}
	// The others alone, named.
	code, stdout, stderr = runBinary(t, "", nil, "changes", "apply", "--data-dir", data, id, "report.txt", "old.txt")
	if code != 0 || !strings.Contains(stdout, "applied  added    report.txt") || !strings.Contains(stdout, "applied  deleted  old.txt") {
		t.Errorf("changes apply ID report.txt old.txt: exit %d\n%s%s", code, stdout, stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "notes.txt")); string(b) != "todo\nmine\n" {
		t.Errorf("the user's notes.txt was overwritten: %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "report.txt")); string(b) != "total 245.50\n" {
		t.Errorf("report.txt = %q", b)
	}
	if _, err := os.Stat(filepath.Join(dir, "old.txt")); err == nil {
		t.Error("old.txt was not removed")
	}
	// What was not applied stays kept, alone.
	code, stdout, _ = runBinary(t, "", nil, "changes", "diff", "--data-dir", data, id)
	if code != 0 || !strings.Contains(stdout, "modified notes.txt") || strings.Contains(stdout, "added    report.txt") || strings.Contains(stdout, "deleted  old.txt") {
		t.Errorf("changes diff after a partial apply: exit %d\n%s", code, stdout)
	}
	// --force takes the run's notes.txt over the user's edit, and the set
	// goes once all is applied.
	code, stdout, stderr = runBinary(t, "", nil, "changes", "apply", "--data-dir", data, "--force", "notes.txt", id)
	if code != 0 || !strings.Contains(stdout, "applied  modified notes.txt") {
		t.Errorf("changes apply --force notes.txt: exit %d\n%s%s", code, stdout, stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "notes.txt")); string(b) != "todo\nchecked\n" {
		t.Errorf("forced notes.txt = %q", b)
	}
	if code, stdout, _ = runBinary(t, "", nil, "changes", "list", "--data-dir", data); strings.Contains(stdout, id) {
		t.Errorf("an applied set is still listed:\n%s", stdout)
	}
	if code, _, stderr = runBinary(t, "", nil, "changes", "apply", "--data-dir", data, "../../etc"); code != 2 {
		t.Errorf("an ID that is a path: exit %d\n%s", code, stderr)
	}
}

// --apply applies a successful run's changes, and --json says what
// happened to the folder. The program is codeagent's, not a change: the
// user's own solution.py and test_solution.py stay as they are, and --out
// gets the program as solution.py.
func TestRunInFolderApply(t *testing.T) {
	dir := userFolder(t)
	for _, name := range []string{"solution.py", "test_solution.py"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("# the user's own "+name+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	out := t.TempDir()
	_, flags := modelServer(t, pyAnswer(folderProgram))
	code, stdout, stderr := runBinary(t, dir, nil, append(append([]string{"run", "--data-dir", t.TempDir(), "--json", "--apply", "--out", out}, flags...),
		"--no-verify", "Sum the revenue in sales.csv into report.txt")...)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	var res struct {
		Success bool
		Folder  struct {
			Dir     string
			Applied bool
			Changes []struct{ Path, Kind string }
		}
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	if !res.Success || !res.Folder.Applied || res.Folder.Dir != dir || len(res.Folder.Changes) != 3 {
		t.Errorf("--json folder = %+v, want the 3 changes of the program's own", res.Folder)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "notes.txt")); string(b) != "todo\nchecked\n" {
		t.Errorf("notes.txt = %q", b)
	}
	if fi, _ := os.Stat(filepath.Join(dir, "notes.txt")); fi.Mode().Perm() != 0o640 {
		t.Errorf("notes.txt's mode changed to %v", fi.Mode().Perm())
	}
	for _, name := range []string{"solution.py", "test_solution.py"} {
		if b, err := os.ReadFile(filepath.Join(dir, name)); err != nil || string(b) != "# the user's own "+name+"\n" {
			t.Errorf("the user's %s = %q, %v", name, b, err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(out, "solution.py")); err != nil || string(b) != folderProgram {
		t.Errorf("--out's solution.py = %q, %v; want the program", b, err)
	}
	if _, err := os.Lstat(filepath.Join(dir, ".codeagent")); err == nil {
		t.Error("codeagent's own directory reached the folder")
	}
	if b, _ := os.ReadFile(filepath.Join(dir, ".git/HEAD")); string(b) != "ref: refs/heads/main\n" {
		t.Errorf(".git changed: %q", b)
	}
}

// At a terminal, the run asks; "d" shows the diff, "y" applies.
func TestRunInFolderAsksAtATerminal(t *testing.T) {
	dir := userFolder(t)
	_, flags := modelServer(t, pyAnswer(folderProgram))
	m, s := openPTY(t)
	defer m.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, mcpBinary(t), append(append([]string{"run", "--data-dir", t.TempDir()}, flags...),
		"--no-verify", "Sum the revenue in sales.csv into report.txt")...)
	cmd.Dir = dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = s, s, s
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	var out strings.Builder
	prompts := make(chan struct{}, 4)
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 4096)
		for {
			n, err := m.Read(buf)
			out.Write(buf[:n])
			if strings.Count(out.String(), "? [y/N/d=diff]") > len(prompts) {
				prompts <- struct{}{}
			}
			if err != nil {
				return
			}
		}
	}()
	for _, answer := range []string{"d\n", "y\n"} {
		select {
		case <-prompts:
		case <-ctx.Done():
			t.Fatalf("no prompt:\n%s", out.String())
		}
		io.WriteString(m, answer)
	}
	cmd.Wait()
	<-done
	if cmd.ProcessState.ExitCode() != 0 {
		t.Fatalf("exit %d\n%s", cmd.ProcessState.ExitCode(), out.String())
	}
	if !strings.Contains(out.String(), "+total 245.50") {
		t.Errorf("d did not show the diff:\n%s", out.String())
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "report.txt")); string(b) != "total 245.50\n" {
		t.Errorf("y did not apply: report.txt = %q\n%s", b, out.String())
	}
}

// A folder is offered whatever it holds (a file of 1 GiB here, once over
// the limit; sparse, and sparse in the copy); one whose copy does not fit
// where workspaces are made (TMPDIR on a small file system) fails at once,
// exit 2, before any model request, saying how much it takes and how much
// is free.
func TestRunInFolderTooLarge(t *testing.T) {
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "huge.bin"))
	if err != nil {
		t.Fatal(err)
	}
	f.Truncate(1<<30 + 1) // sparse
	f.Close()
	list := pyAnswer("import os\nprint(sorted(os.listdir('.')), os.path.getsize('huge.bin'))\n")
	srv, flags := modelServer(t, list)
	code, stdout, stderr := runBinary(t, dir, nil, append(append([]string{"run", "--data-dir", t.TempDir()}, flags...),
		"--no-verify", "list the files")...)
	if code != 0 || !strings.Contains(stdout, "'huge.bin'] 1073741825") || strings.Contains(stderr, "not offered") {
		t.Errorf("a large sparse file: exit %d\n%s%s", code, stdout, stderr)
	}
	if os.Geteuid() != 0 {
		t.Skip("a small file system for TMPDIR needs root to mount")
	}
	small := t.TempDir()
	if err := syscall.Mount("tmpfs", small, "tmpfs", 0, "size=32m"); err != nil {
		t.Skipf("mount a tmpfs: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(small, syscall.MNT_DETACH) })
	big, err := os.Create(filepath.Join(dir, "dense.bin"))
	if err == nil {
		_, err = big.Write(make([]byte, 48<<20))
		big.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	srv, flags = modelServer(t, list)
	code, stdout, stderr = runBinary(t, dir, []string{"TMPDIR=" + small}, append(append([]string{"run", "--data-dir", t.TempDir()}, flags...),
		"--no-verify", "list the files")...)
	if code != 2 || !strings.Contains(stderr, "does not fit in "+small) || !strings.Contains(stderr, "free") || len(srv.Requests()) != 0 {
		t.Errorf("a folder that does not fit: exit %d, %d model requests\n%s%s", code, len(srv.Requests()), stdout, stderr)
	}
}

// A user's own runs of one session, one after another, never wait for the
// session's default rate limit: three runs of four attempts each (twelve
// executions in a few seconds) go through without a wait.
func TestLocalSessionRunsDoNotStall(t *testing.T) {
	data := t.TempDir()
	for i := range 3 {
		_, flags := modelServer(t, pyAnswer("1/0\n"), pyAnswer("1/0\n"), pyAnswer("1/0\n"), pyAnswer("print('ok')\n"))
		code, stdout, stderr := runBinary(t, "", nil, append(append([]string{"run", "--data-dir", data, "--session", "s"}, flags...),
			"--no-verify", "--fresh-start-after", "0", "print ok")...)
		if code != 0 || strings.Contains(stderr, "waiting") || !strings.Contains(stdout, "success after 4 attempt(s)") {
			t.Fatalf("run %d: exit %d\n%s%s", i+1, code, stdout, stderr)
		}
	}
}

// A program attacks the folder through its changes: links to host files
// under the names of new and existing files, and a git hook that would run
// on the host at the user's next commit. With --apply, none of it reaches
// the folder or the host.
func TestAttackRunInFolderChanges(t *testing.T) {
	dir := userFolder(t)
	os.MkdirAll(filepath.Join(dir, ".git/hooks"), 0o755)
	secret := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(secret, []byte("host secret\n"), 0o600)
	attack := fmt.Sprintf(`from pathlib import Path
Path("notes.txt").unlink()
Path("notes.txt").symlink_to(%q)
Path("link.txt").symlink_to(%q)
Path(".git/hooks/post-commit").write_text("#!/bin/sh\ntouch /tmp/pwned-by-codeagent-test\n")
Path(".git/hooks/post-commit").chmod(0o755)
Path("report.txt").write_text("ok\n")
print("done")
`, secret, secret)
	_, flags := modelServer(t, pyAnswer(attack))
	code, stdout, stderr := runBinary(t, dir, nil, append(append([]string{"run", "--data-dir", t.TempDir(), "--apply"}, flags...),
		"--no-verify", "write report.txt")...)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "notes.txt")); err != nil || string(b) != "todo\n" {
		t.Errorf("notes.txt = %q, %v: the link replaced or removed the user's file", b, err)
	}
	if fi, err := os.Lstat(filepath.Join(dir, "link.txt")); err == nil {
		t.Errorf("link.txt reached the folder: %v", fi.Mode())
	}
	if _, err := os.Lstat(filepath.Join(dir, ".git/hooks/post-commit")); err == nil {
		t.Error("a git hook reached the folder")
	}
	if b, _ := os.ReadFile(secret); string(b) != "host secret\n" {
		t.Errorf("the host file changed: %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "report.txt")); string(b) != "ok\n" {
		t.Errorf("the legitimate change was not applied: %q", b)
	}
	for _, want := range []string{"skipped  notes.txt: symbolic link where the folder has a file", "skipped  .git/hooks/post-commit: git's files (.git) are read-only to runs"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
}

// Ctrl-C during a run in a folder keeps what the run changed, applies
// nothing, and says where it is.
func TestRunInFolderInterruptedKeepsChanges(t *testing.T) {
	dir := userFolder(t)
	before := treeLook(t, dir)
	data := t.TempDir()
	_, flags := modelServer(t, pyAnswer("open('report.txt', 'w').write('partial\\n')\nimport time\ntime.sleep(30)\n"))
	cmd := exec.Command(mcpBinary(t), append(append([]string{"run", "--data-dir", data, "--apply", "--progress"}, flags...),
		"--no-verify", "write report.txt")...)
	cmd.Dir = dir
	var errb syncBuffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(errb.String(), "running") && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(1500 * time.Millisecond)
	cmd.Process.Signal(syscall.SIGINT)
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatal("still running 30s after SIGINT")
	}
	if code := cmd.ProcessState.ExitCode(); code != 130 || !keptRE.MatchString(errb.String()) {
		t.Fatalf("exit %d, want 130 with the changes kept:\n%s", code, errb.String())
	}
	if after := treeLook(t, dir); after != before {
		t.Errorf("an interrupted run changed the folder:\n%s", after)
	}
	code, stdout, _ := runBinary(t, "", nil, "changes", "diff", "--data-dir", data, keptRE.FindStringSubmatch(errb.String())[1])
	if code != 0 || !strings.Contains(stdout, "added    report.txt") || strings.Contains(stdout, "solution.py") {
		t.Errorf("changes diff: exit %d\n%s", code, stdout)
	}
}
