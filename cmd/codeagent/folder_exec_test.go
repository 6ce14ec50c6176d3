package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// folderCounter lists what a program sees of its workspace, then changes
// it: a file added, one deleted, one in a directory the folder's
// .gitignore ignores.
const folderCounter = `import os
n = sum(len(files) for _, _, files in os.walk("."))
print("files", n, open("data.txt").read().strip())
open("out.txt", "w").write("made\n")
os.makedirs("build", exist_ok=True)
open("build/x.o", "w").write("object\n")
os.remove("data.txt")
`

// exec works in a copy of the current folder, whatever its size: the
// program sees every file (20,000 here, over the 10,000 a run was once
// limited to); what it changes is listed (what the folder's .gitignore
// ignores is not offered), kept, and applied with --apply, all as the
// user who runs it.
func TestExecSeesTheFolder(t *testing.T) {
	forInvokers(t, func(t *testing.T, iv invoker) {
		base := userDir(t, iv.uid)
		dir, data := filepath.Join(base, "project"), filepath.Join(base, "data")
		files := map[string]string{"data.txt": "hello", ".gitignore": "build/\n"}
		for i := range 20000 {
			files[fmt.Sprintf("tree/d%03d/f%05d.csv", i%200, i)] = "1\n"
		}
		for rel, text := range files {
			p := filepath.Join(dir, rel)
			os.MkdirAll(filepath.Dir(p), 0o755)
			if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		os.Mkdir(data, 0o700)
		prog := filepath.Join(base, "count.py")
		if err := os.WriteFile(prog, []byte(folderCounter), 0o644); err != nil {
			t.Fatal(err)
		}
		iv.own(t, base)
		args := []string{"exec", "--backend", iv.backend, "--data-dir", data, "--timeout", "2m", "--disk", "1GiB", prog}
		code, out, errOut := iv.run(t, dir, args...)
		if code != 0 || strings.TrimSpace(out) != "files 20002 hello" {
			t.Fatalf("exec: exit %d, %q\n%s", code, out, errOut)
		}
		for _, want := range []string{"added    out.txt", "deleted  data.txt", "skipped  build/x.o: ignored by the folder's .gitignore", "change(s) are kept in"} {
			if !strings.Contains(errOut, want) {
				t.Errorf("stderr lacks %q:\n%s", want, errOut)
			}
		}
		if _, err := os.Stat(filepath.Join(dir, "data.txt")); err != nil {
			t.Errorf("without --apply the folder changed: %v", err)
		}
		code, _, errOut = iv.run(t, dir, append(args[:len(args)-1], "--apply", prog)...)
		if code != 0 || !strings.Contains(errOut, "applied 2 change(s)") {
			t.Fatalf("exec --apply: exit %d\n%s", code, errOut)
		}
		if b, err := os.ReadFile(filepath.Join(dir, "out.txt")); err != nil || string(b) != "made\n" {
			t.Errorf("out.txt: %q, %v", b, err)
		}
		if _, err := os.Stat(filepath.Join(dir, "data.txt")); !os.IsNotExist(err) {
			t.Errorf("data.txt was not deleted: %v", err)
		}
		if _, err := os.Stat(filepath.Join(dir, "build")); !os.IsNotExist(err) {
			t.Errorf("an ignored directory was applied: %v", err)
		}
		code, out, errOut = iv.run(t, dir, "exec", "--backend", iv.backend, "--no-folder", "--data-dir", data, prog)
		if code != 1 || !strings.Contains(errOut, "No such file or directory") || strings.Contains(out, "files") {
			t.Errorf("--no-folder: exit %d, %q\n%s", code, out, errOut)
		}
	})
}

// repl works in a copy of the current folder too: a cell imports the
// folder's module and writes a file, which is listed and kept at the end.
func TestReplSeesTheFolder(t *testing.T) {
	dir, data := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "helpers.py"), []byte("ANSWER = 42\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cells := "import helpers\nprint('answer', helpers.ANSWER)\nopen('note.txt', 'w').write('n')\n"
	code, out, errOut := runBinaryStdin(t, dir, cells, "repl", "--data-dir", data)
	if code != 0 || !strings.Contains(out, "answer 42") || !strings.Contains(errOut, "added    note.txt") ||
		!strings.Contains(errOut, "the repl's 1 change(s) are kept") {
		t.Fatalf("repl: exit %d\n%s\n%s", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, "note.txt")); !os.IsNotExist(err) {
		t.Errorf("the repl changed the folder without --apply: %v", err)
	}
	code, _, errOut = runBinaryStdin(t, dir, cells, "repl", "--data-dir", data, "--apply")
	if b, err := os.ReadFile(filepath.Join(dir, "note.txt")); code != 0 || err != nil || string(b) != "n" {
		t.Errorf("repl --apply: exit %d, note.txt %q %v\n%s", code, b, err, errOut)
	}
}

// runBinaryStdin is runBinary with stdin.
func runBinaryStdin(t *testing.T, dir, stdin string, args ...string) (int, string, string) {
	t.Helper()
	return runBinaryWith(t, dir, nil, strings.NewReader(stdin), args...)
}
