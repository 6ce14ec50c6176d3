package workspace

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestUpdateIn: an input already in a session's workspace is replaced when
// it differs, kept when it is the same; a directory or a link of its name
// is refused and left as it was, and a link is never followed.
func TestUpdateIn(t *testing.T) {
	w := &Workspace{Dir: t.TempDir()}
	src := filepath.Join(t.TempDir(), "sales.csv")
	write := func(p, data string) {
		t.Helper()
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(src, "a\n1\n")
	steps := []struct {
		data string
		want Update
	}{{"a\n1\n", Added}, {"a\n1\n", Unchanged}, {"a\n2\n", Replaced}, {"a\n2\n", Unchanged}}
	for i, st := range steps {
		write(src, st.data)
		name, how, err := w.UpdateIn(src, 1<<20)
		got, _ := os.ReadFile(filepath.Join(w.Dir, "sales.csv"))
		if err != nil || name != "sales.csv" || how != st.want || string(got) != st.data {
			t.Fatalf("step %d: %s %v %v, contents %q", i, name, how, err, got)
		}
	}
	if entries, _ := os.ReadDir(w.Dir); len(entries) != 1 {
		t.Fatalf("the workspace holds %d entries, want sales.csv alone", len(entries))
	}
	target := filepath.Join(t.TempDir(), "target")
	write(target, "host\n")
	for _, name := range []string{"link.csv", "dir.csv"} {
		in := filepath.Join(t.TempDir(), name)
		write(in, "new\n")
		if name == "link.csv" {
			os.Symlink(target, filepath.Join(w.Dir, name))
		} else {
			os.Mkdir(filepath.Join(w.Dir, name), 0o755)
		}
		if _, _, err := w.UpdateIn(in, 1<<20); err == nil {
			t.Errorf("%s: replaced", name)
		}
	}
	if b, _ := os.ReadFile(target); string(b) != "host\n" {
		t.Fatalf("the link's target was written: %q", b)
	}
}

// TestCopyOutNew: CopyOutNew leaves a file already in the output directory
// as it is (ErrExists), copies the rest, and an artifact that is the file
// itself (the output directory is the workspace) counts as copied.
func TestCopyOutNew(t *testing.T) {
	w := &Workspace{Dir: t.TempDir()}
	for name, data := range map[string]string{"a.txt": "new a", "b.txt": "new b"} {
		if err := os.WriteFile(filepath.Join(w.Dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out := t.TempDir()
	if err := os.WriteFile(filepath.Join(out, "a.txt"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	arts := []Artifact{{Path: "a.txt"}, {Path: "b.txt"}}
	copied, err := w.CopyOutNew(arts, out, 0)
	if !errors.Is(err, ErrExists) || len(copied) != 1 || copied[0] != "b.txt" {
		t.Fatalf("copied %v, err %v", copied, err)
	}
	if a, _ := os.ReadFile(filepath.Join(out, "a.txt")); len(a) != 0 {
		t.Fatalf("the empty a.txt of the output directory was replaced: %q", a)
	}
	if copied, err := w.CopyOutNew(arts, w.Dir, 0); err != nil || len(copied) != 2 {
		t.Fatalf("into the workspace itself: %v %v", copied, err)
	}
}
