package workspace

import (
	"os"
	"path/filepath"
	"testing"
)

// The rules of gitignore(5) that projects use: names at any depth,
// anchored paths, directories only, negation, ** in its three places,
// classes, deeper files overriding, .git/info/exclude, and a file inside
// an ignored directory staying ignored whatever a negation says.
func TestIgnorer(t *testing.T) {
	dir := t.TempDir()
	write := func(rel, data string) {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(".gitignore", "# build output\n*.pyc\n/build/\nnode_modules/\n**/cache/**\nlogs/**/*.log\n*.tmp\n!keep.tmp\nout[0-9].csv\n\\#hash\ntrailing.txt  \ndata/*\n!data/keep.csv\nvendor/\n!vendor/x.go\n")
	write("sub/.gitignore", "local.txt\n!important.pyc\n/anchored.txt\n")
	write(".git/info/exclude", "secret-notes.md\n")
	root, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	ig := NewIgnorer(root)
	for _, c := range []struct {
		rel  string
		dir  bool
		want bool
	}{
		{"a.pyc", false, true}, {"deep/er/a.pyc", false, true}, {"a.py", false, false},
		{"build", true, true}, {"build/x.o", false, true}, {"sub/build/x.o", false, false}, {"build", false, false},
		{"node_modules/left-pad/index.js", false, true}, {"x/node_modules/y.js", false, true},
		{"a/cache/b/c.txt", false, true}, {"cache/c.txt", false, true},
		{"logs/a.log", false, true}, {"logs/x/y/a.log", false, true}, {"logs/a.txt", false, false},
		{"x.tmp", false, true}, {"keep.tmp", false, false},
		{"out1.csv", false, true}, {"out10.csv", false, false},
		{"#hash", false, true}, {"trailing.txt", false, true},
		{"data/a.csv", false, true}, {"data/keep.csv", false, false},
		{"vendor/x.go", false, true}, // a directory ignored: nothing below it comes back
		{"sub/local.txt", false, true}, {"local.txt", false, false},
		{"sub/important.pyc", false, false}, {"sub/anchored.txt", false, true}, {"sub/deeper/anchored.txt", false, false},
		{"secret-notes.md", false, true}, {"sub/secret-notes.md", false, true},
		{"report.csv", false, false},
	} {
		if got := ig.Ignored(c.rel, c.dir); got != c.want {
			t.Errorf("Ignored(%q, dir=%v) = %v, want %v", c.rel, c.dir, got, c.want)
		}
	}
}
