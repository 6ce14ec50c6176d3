package workspace

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/codeagent/codeagent/lang"
)

func newWS(t *testing.T) *Workspace {
	t.Helper()
	w, err := New(filepath.Join(t.TempDir(), "ws"))
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestTemporaryWorkspaceIsRemovedKeptOneStays(t *testing.T) {
	tmp, err := New("")
	if err != nil {
		t.Fatal(err)
	}
	if !tmp.Temporary() {
		t.Fatal("not temporary")
	}
	tmp.Close()
	if _, err := os.Stat(tmp.Dir); !os.IsNotExist(err) {
		t.Errorf("temporary workspace still there: %v", err)
	}
	kept := newWS(t)
	kept.Close()
	if _, err := os.Stat(kept.Dir); err != nil {
		t.Errorf("kept workspace removed: %v", err)
	}
}

func TestValidName(t *testing.T) {
	for name, want := range map[string]bool{
		"sales.csv": true, "data_2024-01.json": true, "My File.txt": true,
		"": false, "..": false, "a/b.csv": false, ".hidden": false, "-rf": false,
		"a..b": false, "x\x00y": false, "line\nbreak": false,
	} {
		if got := ValidName(name); got != want {
			t.Errorf("ValidName(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestCopyIn(t *testing.T) {
	w := newWS(t)
	src := filepath.Join(t.TempDir(), "sales.csv")
	write(t, src, "a,b\n1,2\n")
	name, err := w.CopyIn(src, 0)
	if err != nil || name != "sales.csv" {
		t.Fatalf("CopyIn = %q, %v", name, err)
	}
	if b, _ := os.ReadFile(filepath.Join(w.Dir, "sales.csv")); string(b) != "a,b\n1,2\n" {
		t.Errorf("copied %q", b)
	}
	if _, err := w.CopyIn(src, 0); err == nil {
		t.Error("second copy of the same name accepted")
	}
	if _, err := w.CopyIn(src, 3); err == nil {
		t.Error("oversized input accepted")
	}
	bad := filepath.Join(t.TempDir(), ".env")
	write(t, bad, "x")
	if _, err := w.CopyIn(bad, 0); err == nil {
		t.Error("hidden name accepted")
	}
	if _, err := w.CopyIn(t.TempDir(), 0); err == nil {
		t.Error("directory accepted")
	}
}

func TestWriteFileReplacesSymlinkWithoutTouchingTarget(t *testing.T) {
	w := newWS(t)
	target := filepath.Join(t.TempDir(), "host.txt")
	write(t, target, "host data")
	if err := os.Symlink(target, filepath.Join(w.Dir, "solution.py")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(w.Dir, "test_solution.py", "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteFile("solution.py", []byte("print(1)\n")); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteFile("test_solution.py", []byte("x\n")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(target); string(b) != "host data" {
		t.Fatalf("host file changed: %q", b)
	}
	fi, err := os.Lstat(filepath.Join(w.Dir, "solution.py"))
	if err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("solution.py: %v %v", fi, err)
	}
	if err := w.WriteFile("../escape.py", nil); err == nil {
		t.Error("name with .. accepted")
	}
}

// codeagent's own directory, which a program can replace with a link to a
// host directory, is made again: the write lands in the workspace.
func TestWriteFileInTheOwnDirectoryFollowsNoLink(t *testing.T) {
	w := newWS(t)
	host := t.TempDir()
	if err := os.Symlink(host, filepath.Join(w.Dir, lang.OwnDir)); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteFile(lang.OwnDir+"/solution.py", []byte("print(1)\n")); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(host); len(ents) != 0 {
		t.Fatalf("the write went through the link: %v", ents)
	}
	if b, err := os.ReadFile(filepath.Join(w.Dir, lang.OwnDir, "solution.py")); err != nil || string(b) != "print(1)\n" {
		t.Errorf("own solution.py = %q, %v", b, err)
	}
	// A file in its place goes too; other directories are not codeagent's.
	os.RemoveAll(filepath.Join(w.Dir, lang.OwnDir))
	write(t, filepath.Join(w.Dir, lang.OwnDir), "a file")
	if err := w.WriteFile(lang.OwnDir+"/test_solution.py", []byte("x\n")); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"sub/solution.py", lang.OwnDir + "/../x", lang.OwnDir + "/a/b"} {
		if err := w.WriteFile(bad, nil); err == nil {
			t.Errorf("WriteFile(%q) accepted", bad)
		}
	}
}

func TestChangesListsNewAndChangedRegularFilesOnly(t *testing.T) {
	w := newWS(t)
	write(t, filepath.Join(w.Dir, "input.csv"), "a\n")
	write(t, filepath.Join(w.Dir, "same.txt"), "same")
	before, err := w.Snapshot(Limits{})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond)
	write(t, filepath.Join(w.Dir, "input.csv"), "a\nb\n")
	write(t, filepath.Join(w.Dir, "out", "plot.png"), "png")
	write(t, filepath.Join(w.Dir, "solution.py"), "print()")
	write(t, filepath.Join(w.Dir, "__pycache__", "x.pyc"), "pyc")
	os.Symlink("/etc/passwd", filepath.Join(w.Dir, "passwd"))
	os.Symlink("/etc", filepath.Join(w.Dir, "etc"))
	if err := syscall.Mkfifo(filepath.Join(w.Dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	arts, skipped, err := w.Changes(before, Limits{}, func(p string) bool { return p == "solution.py" })
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range arts {
		got = append(got, a.Path+":"+a.Change)
	}
	if strings.Join(got, " ") != "input.csv:changed out/plot.png:new" {
		t.Errorf("artifacts = %v", got)
	}
	reasons := map[string]string{}
	for _, s := range skipped {
		reasons[s.Path] = s.Reason
	}
	if !strings.Contains(reasons["passwd"], "symbolic link") || !strings.Contains(reasons["etc"], "symbolic link") ||
		!strings.Contains(reasons["fifo"], "regular") {
		t.Errorf("skipped = %v", skipped)
	}
}

func TestChangesCapsCountAndTotalSize(t *testing.T) {
	w := newWS(t)
	before, _ := w.Snapshot(Limits{})
	write(t, filepath.Join(w.Dir, "a.txt"), "12345")
	write(t, filepath.Join(w.Dir, "b.txt"), strings.Repeat("x", 100)) // oversized
	write(t, filepath.Join(w.Dir, "c.txt"), "1")
	write(t, filepath.Join(w.Dir, "d.txt"), "2")
	arts, skipped, err := w.Changes(before, Limits{MaxTotal: 10, MaxFiles: 2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(arts) != 2 || arts[0].Path != "a.txt" || arts[1].Path != "c.txt" {
		t.Errorf("artifacts = %v", arts)
	}
	if len(skipped) != 2 || skipped[0].Path != "b.txt" || skipped[1].Path != "d.txt" {
		t.Errorf("skipped = %v", skipped)
	}
	if _, _, err := w.Changes(before, Limits{MaxEntries: 2}, nil); err != nil {
		t.Fatal(err)
	}
	if s, _ := w.Snapshot(Limits{MaxEntries: 2}); !s.Truncated {
		t.Error("walk not truncated at MaxEntries")
	}
}

func TestCopyOutIsSafe(t *testing.T) {
	w := newWS(t)
	write(t, filepath.Join(w.Dir, "out", "plot.png"), "png")
	write(t, filepath.Join(w.Dir, "big.bin"), strings.Repeat("x", 50))
	os.Symlink("/etc/passwd", filepath.Join(w.Dir, "passwd"))
	syscall.Mkfifo(filepath.Join(w.Dir, "fifo"), 0o644)
	dst := filepath.Join(t.TempDir(), "results")
	arts := []Artifact{{Path: "out/plot.png"}, {Path: "passwd"}, {Path: "fifo"}, {Path: "../x"}, {Path: "big.bin"}}
	done := make(chan struct{})
	var copied []string
	var err error
	go func() {
		copied, err = w.CopyOut(arts, dst, 20)
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("CopyOut hung (on the FIFO?)")
	}
	if len(copied) != 1 || copied[0] != "out/plot.png" {
		t.Errorf("copied = %v", copied)
	}
	if err == nil {
		t.Error("no error for the refused entries")
	}
	if b, _ := os.ReadFile(filepath.Join(dst, "out", "plot.png")); string(b) != "png" {
		t.Errorf("plot.png = %q", b)
	}
	for _, n := range []string{"passwd", "fifo", "big.bin"} {
		if _, err := os.Lstat(filepath.Join(dst, n)); err == nil {
			t.Errorf("%s was copied", n)
		}
	}
	// A symbolic link planted in the destination is not followed.
	host := filepath.Join(t.TempDir(), "host.txt")
	write(t, host, "host")
	dst2 := t.TempDir()
	os.Symlink(host, filepath.Join(dst2, "big.bin"))
	if _, err := w.CopyOut([]Artifact{{Path: "big.bin"}}, dst2, 0); err == nil {
		t.Error("copy through a symbolic link in the destination succeeded")
	}
	if b, _ := os.ReadFile(host); string(b) != "host" {
		t.Errorf("host file changed: %q", b)
	}
}

func TestDescribe(t *testing.T) {
	w := newWS(t)
	if d := w.Describe(nil); d != "" {
		t.Errorf("empty workspace described as %q", d)
	}
	write(t, filepath.Join(w.Dir, "sales.csv"), "date,product,units,price\n2024-01-03,Widget,3,9.5\n2024-01-04,Gadget,1,20\n"+strings.Repeat("2024-02-01,Widget,1,9.5\n", 100))
	write(t, filepath.Join(w.Dir, "config.json"), `{"k": "`+strings.Repeat("v", 500)+`"}`)
	write(t, filepath.Join(w.Dir, "solution.py"), "x")
	os.Symlink("/etc/passwd", filepath.Join(w.Dir, "passwd.csv"))
	d := w.Describe(func(p string) bool { return p == "solution.py" })
	for _, want := range []string{"- sales.csv (", "| date,product,units,price", "| 2024-01-03,Widget,3,9.5", "- config.json (", "..."} {
		if !strings.Contains(d, want) {
			t.Errorf("description lacks %q:\n%s", want, d)
		}
	}
	if strings.Contains(d, "solution.py") || strings.Contains(d, "passwd") || strings.Count(d, "| 2024-02-01") > 3 {
		t.Errorf("description:\n%s", d)
	}
}
