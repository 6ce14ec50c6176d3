package workspace

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// project makes a folder as a user has it.
func project(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	write := func(rel, data string, mode os.FileMode) {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), mode); err != nil {
			t.Fatal(err)
		}
	}
	write("sales.csv", "month,revenue\njan,10\n", 0o640)
	write("notes/todo.txt", "one\ntwo\n", 0o644)
	write("run.sh", "#!/bin/sh\n", 0o755)
	write("old.txt", "remove me\n", 0o644)
	write(".git/HEAD", "ref: refs/heads/main\n", 0o644)
	if err := os.Symlink("/etc/passwd", filepath.Join(dir, "passwd")); err != nil {
		t.Fatal(err)
	}
	return dir
}

func seeded(t *testing.T, dir string) (*Folder, *Workspace) {
	t.Helper()
	f, err := ScanFolder(dir, DefaultFolderLimits())
	if err != nil {
		t.Fatal(err)
	}
	ws, err := NewTemp(t.TempDir(), "ws-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	if err := f.Seed(ws); err != nil {
		t.Fatal(err)
	}
	return f, ws
}

func TestFolderSeedAndChanges(t *testing.T) {
	dir := project(t)
	f, ws := seeded(t, dir)
	if got, _ := os.ReadFile(filepath.Join(ws.Dir, "notes/todo.txt")); string(got) != "one\ntwo\n" {
		t.Fatalf("seeded todo.txt = %q", got)
	}
	if _, err := os.Lstat(filepath.Join(ws.Dir, "passwd")); err == nil {
		t.Error("a link of the folder was offered to the run")
	}
	if fi, err := os.Stat(filepath.Join(ws.Dir, "run.sh")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("run.sh in the workspace: %v %v", fi, err)
	}
	// The program's work: a report, a changed CSV, a removed file, and a
	// change to .git, which is never applied.
	os.WriteFile(filepath.Join(ws.Dir, "report.txt"), []byte("total 10\n"), 0o644)
	os.WriteFile(filepath.Join(ws.Dir, "sales.csv"), []byte("month,revenue\njan,11\n"), 0o644)
	os.Remove(filepath.Join(ws.Dir, "old.txt"))
	os.WriteFile(filepath.Join(ws.Dir, ".git/HEAD"), []byte("ref: refs/heads/evil\n"), 0o644)
	changes, skipped, err := f.FolderChanges(ws, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	want := "old.txt deleted 10|report.txt added 9|sales.csv modified 21|"
	var got strings.Builder
	for _, c := range changes {
		got.WriteString(c.Path + " " + c.Kind + " " + strconv.FormatInt(c.Size, 10) + "|")
	}
	if got.String() != want {
		t.Errorf("changes = %s, want %s", got.String(), want)
	}
	if len(skipped) != 1 || skipped[0].Path != ".git/HEAD" {
		t.Errorf("skipped = %v, want .git/HEAD", skipped)
	}
	diff, err := Diff(dir, ws.Dir, changes)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"--- a/sales.csv", "+++ b/sales.csv", "-jan,10", "+jan,11", "+++ b/report.txt", "-remove me"} {
		if !strings.Contains(diff, s) {
			t.Errorf("diff lacks %q:\n%s", s, diff)
		}
	}
}

func TestFolderApply(t *testing.T) {
	dir := project(t)
	f, ws := seeded(t, dir)
	os.WriteFile(filepath.Join(ws.Dir, "report.txt"), []byte("total 10\n"), 0o644)
	os.WriteFile(filepath.Join(ws.Dir, "sales.csv"), []byte("month,revenue\njan,11\n"), 0o644)
	os.WriteFile(filepath.Join(ws.Dir, "notes/todo.txt"), []byte("done\n"), 0o644)
	os.MkdirAll(filepath.Join(ws.Dir, "out/plots"), 0o755)
	os.WriteFile(filepath.Join(ws.Dir, "out/plots/a.png"), []byte("\x89PNG"), 0o644)
	os.Remove(filepath.Join(ws.Dir, "old.txt"))
	changes, _, err := f.FolderChanges(ws, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	// Meanwhile the user edits todo.txt in the folder: that edit is kept.
	if err := os.WriteFile(filepath.Join(dir, "notes/todo.txt"), []byte("one\ntwo\nthree\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A conflict applies nothing: the check comes first.
	before := treeOf(t, dir)
	res, err := Apply(dir, ws.Dir, f.Files, changes, ApplyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Applied) != 0 || len(res.Refused) != 1 || res.Refused[0].Path != "notes/todo.txt" || res.Stopped {
		t.Fatalf("applied %v, refused %v", res.Applied, res.Refused)
	}
	if after := treeOf(t, dir); after != before {
		t.Fatalf("a refused apply wrote:\nbefore %s\nafter %s", before, after)
	}
	// The others alone are applied.
	var others []Change
	for _, c := range changes {
		if c.Path != "notes/todo.txt" {
			others = append(others, c)
		}
	}
	res, err = Apply(dir, ws.Dir, f.Files, others, ApplyOptions{})
	if err != nil || len(res.Applied) != 4 || !res.Complete() {
		t.Fatalf("applied %v, refused %v: %v", res.Applied, res.Refused, err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "notes/todo.txt")); string(got) != "one\ntwo\nthree\n" {
		t.Errorf("the user's edit was overwritten: %q", got)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "sales.csv")); string(got) != "month,revenue\njan,11\n" {
		t.Errorf("sales.csv = %q", got)
	}
	if fi, _ := os.Stat(filepath.Join(dir, "sales.csv")); fi.Mode().Perm() != 0o640 {
		t.Errorf("sales.csv mode %v, want the user's 0640", fi.Mode().Perm())
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "out/plots/a.png")); string(got) != "\x89PNG" {
		t.Errorf("a.png = %q", got)
	}
	if _, err := os.Lstat(filepath.Join(dir, "old.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("old.txt not deleted: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "passwd")); err != nil {
		t.Errorf("the user's link went: %v", err)
	}
	left, _ := filepath.Glob(filepath.Join(dir, ".codeagent-apply-*"))
	if len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
	// Applying the whole set again recognises what is applied, and still
	// refuses the conflict alone.
	res, _ = Apply(dir, ws.Dir, f.Files, changes, ApplyOptions{})
	if len(res.Applied) != 0 || len(res.Already) != 4 || len(res.Refused) != 1 {
		t.Errorf("second apply: %+v", res)
	}
	res, _ = Apply(dir, ws.Dir, f.Files, others, ApplyOptions{})
	if len(res.Applied) != 0 || len(res.Already) != 4 || !res.Complete() {
		t.Errorf("applying the applied again: %+v", res)
	}
	// --force replaces the user's edit.
	res, err = Apply(dir, ws.Dir, f.Files, changes, ApplyOptions{Force: []string{"notes/todo.txt"}})
	if err != nil || len(res.Applied) != 1 || len(res.Already) != 4 || !res.Complete() {
		t.Fatalf("forced: %+v, %v", res, err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "notes/todo.txt")); string(got) != "done\n" {
		t.Errorf("forced todo.txt = %q", got)
	}
}

// treeOf is every entry of dir with its mode, size and contents.
func treeOf(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fmt.Fprintf(&b, "%s %v %d %d", rel, fi.Mode(), fi.Size(), fi.ModTime().UnixNano())
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
	return b.String()
}

// A save the user makes in the moment between the last check of a file
// and its replacement is not lost: the saved file is put back and the
// change refused.
func TestFolderApplyKeepsASaveRacingTheReplacement(t *testing.T) {
	dir := project(t)
	f, ws := seeded(t, dir)
	os.WriteFile(filepath.Join(ws.Dir, "sales.csv"), []byte("run's\n"), 0o644)
	changes, _, _ := f.FolderChanges(ws, Limits{})
	beforeExchange = func(pfd int, name string) {
		// An in-place save keeping the size and the modification time,
		// which only the inode's change time would tell...
		fd, err := unix.Openat(pfd, name, unix.O_WRONLY, 0)
		if err != nil {
			t.Error(err)
			return
		}
		unix.Pwrite(fd, []byte("M"), 0)
		unix.Close(fd)
		// ...and one that replaces the file, as editors do.
		if err := os.WriteFile(filepath.Join(dir, "saved.tmp"), []byte("user's save\n"), 0o644); err != nil {
			t.Error(err)
		}
		if err := unix.Renameat(unix.AT_FDCWD, filepath.Join(dir, "saved.tmp"), pfd, name); err != nil {
			t.Error(err)
		}
	}
	t.Cleanup(func() { beforeExchange = nil })
	res, err := Apply(dir, ws.Dir, f.Files, changes, ApplyOptions{})
	if err != nil || len(res.Applied) != 0 || len(res.Refused) != 1 || !res.Stopped {
		t.Fatalf("apply: %+v, %v", res, err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "sales.csv")); string(got) != "user's save\n" {
		t.Errorf("sales.csv = %q, want the user's save", got)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".codeagent-apply-*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

// A file the user created under a name the run also created is not
// replaced, nor is a link followed on the way to a change.
func TestFolderApplyRefusesAppearedAndLinks(t *testing.T) {
	dir := project(t)
	f, ws := seeded(t, dir)
	os.WriteFile(filepath.Join(ws.Dir, "report.txt"), []byte("run's\n"), 0o644)
	os.WriteFile(filepath.Join(ws.Dir, "notes/new.txt"), []byte("run's\n"), 0o644)
	changes, _, _ := f.FolderChanges(ws, Limits{})
	os.WriteFile(filepath.Join(dir, "report.txt"), []byte("user's\n"), 0o644)
	outside := t.TempDir()
	os.RemoveAll(filepath.Join(dir, "notes"))
	os.Symlink(outside, filepath.Join(dir, "notes"))
	res, _ := Apply(dir, ws.Dir, f.Files, changes, ApplyOptions{})
	if len(res.Applied) != 0 || len(res.Refused) != 2 {
		t.Fatalf("apply: %+v", res)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "report.txt")); string(got) != "user's\n" {
		t.Errorf("report.txt = %q", got)
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Errorf("a change went through a link: %v", ents)
	}
}

func TestFolderTooLarge(t *testing.T) {
	dir := project(t)
	if _, err := ScanFolder(dir, FolderLimits{MaxEntries: 3, MaxBytes: 1 << 30}); !errors.Is(err, ErrFolderTooLarge) {
		t.Errorf("entries: %v", err)
	}
	if _, err := ScanFolder(dir, FolderLimits{MaxEntries: 100, MaxBytes: 20}); !errors.Is(err, ErrFolderTooLarge) {
		t.Errorf("bytes: %v", err)
	}
}

func TestKeptChanges(t *testing.T) {
	dir := project(t)
	f, ws := seeded(t, dir)
	os.WriteFile(filepath.Join(ws.Dir, "report.txt"), []byte("total 10\n"), 0o644)
	os.Remove(filepath.Join(ws.Dir, "old.txt"))
	changes, _, _ := f.FolderChanges(ws, Limits{})
	data := t.TempDir()
	k, err := Keep(data, f, ws, "the task", changes)
	if err != nil {
		t.Fatal(err)
	}
	ws.Close() // the run's workspace goes; the kept changes stay
	got, err := LoadKept(data, k.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Folder != f.Dir || len(got.Changes) != 2 || got.Task != "the task" {
		t.Fatalf("loaded %+v", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "report.txt")); err == nil {
		t.Fatal("keeping changes applied them")
	}
	res, err := Apply(got.Folder, got.Files, got.Base, got.Changes, ApplyOptions{})
	if err != nil || len(res.Applied) != 2 || !res.Complete() {
		t.Fatalf("apply kept: %+v %v", res, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "report.txt")); string(b) != "total 10\n" {
		t.Errorf("report.txt = %q", b)
	}
	list, _ := ListKept(data)
	if len(list) != 1 {
		t.Errorf("list = %v", list)
	}
	if err := RemoveKept(data, k.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadKept(data, k.ID); !errors.Is(err, ErrNoKept) {
		t.Errorf("after rm: %v", err)
	}
	if _, err := LoadKept(data, "../../etc"); !errors.Is(err, ErrNoKept) {
		t.Errorf("a path as ID: %v", err)
	}
}

// A change that keeps a file's size and puts its modification time back
// is still a change: the copy's change time moved.
func TestFolderChangesSeeSameSizeEdits(t *testing.T) {
	dir := project(t)
	f, ws := seeded(t, dir)
	p := filepath.Join(ws.Dir, "sales.csv")
	fi, _ := os.Stat(p)
	if err := os.WriteFile(p, []byte("month,revenue\njan,99\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chtimes(p, fi.ModTime(), fi.ModTime())
	changes, _, err := f.FolderChanges(ws, Limits{})
	if err != nil || len(changes) != 1 || changes[0].Path != "sales.csv" || changes[0].Kind != ChangeModified {
		t.Errorf("changes = %v, %v", changes, err)
	}
}

// Files that commonly hold credentials are not offered to the run, and
// the run does not delete them.
func TestFolderHoldsBackSecrets(t *testing.T) {
	dir := project(t)
	for _, rel := range []string{".env", ".env.production", "deploy.pem", ".ssh/id_ed25519", ".aws/credentials"} {
		os.MkdirAll(filepath.Join(dir, filepath.Dir(rel)), 0o700)
		os.WriteFile(filepath.Join(dir, rel), []byte("SECRET=1\n"), 0o600)
	}
	os.WriteFile(filepath.Join(dir, ".env.example"), []byte("SECRET=\n"), 0o644)
	f, ws := seeded(t, dir)
	for _, rel := range []string{".env", ".env.production", "deploy.pem", ".ssh", ".aws"} {
		if _, err := os.Lstat(filepath.Join(ws.Dir, rel)); err == nil {
			t.Errorf("%s was offered to the run", rel)
		}
	}
	if _, err := os.Stat(filepath.Join(ws.Dir, ".env.example")); err != nil {
		t.Errorf(".env.example was held back: %v", err)
	}
	changes, _, err := f.FolderChanges(ws, Limits{})
	if err != nil || len(changes) != 0 {
		t.Errorf("changes of an untouched run: %v %v", changes, err)
	}
	// A program that writes .env does not replace the user's.
	os.WriteFile(filepath.Join(ws.Dir, ".env"), []byte("SECRET=stolen\n"), 0o644)
	changes, _, _ = f.FolderChanges(ws, Limits{})
	res, _ := Apply(dir, ws.Dir, f.Files, changes, ApplyOptions{})
	if b, _ := os.ReadFile(filepath.Join(dir, ".env")); string(b) != "SECRET=1\n" || len(res.Refused) != 1 {
		t.Errorf(".env = %q, refused %v", b, res.Refused)
	}
}
