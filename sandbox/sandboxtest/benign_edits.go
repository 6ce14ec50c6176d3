package sandboxtest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/workspace"
)

// workspaceEdits changes a workspace in every way a program may: renames
// of the workspace's directories (within and across parents, a swap),
// deletions of inputs and of input trees, overwrites and appends,
// symbolic links, permission bits, a hard link to an input, a file
// replaced by a directory and a directory by a file. The program prints
// what it sees of the workspace at the end, and afterwards the host must
// see exactly that; artifact detection (workspace.Changes) must name what
// changed and nothing else.
func workspaceEdits(t *testing.T, sb sandbox.Sandbox) {
	ws := t.TempDir()
	files := map[string]string{
		"in.txt": "input", "del.txt": "delete me", "over.txt": "old", "app.txt": "start",
		"mode.txt": "mode", "link-src.txt": "shared", "keep.txt": "keep", "file2dir": "a file",
		"dir2file/f": "f", "dir/g.txt": "g", "dir/sub/f.txt": "f", "swap1/a.txt": "1",
		"swap2/b.txt": "2", "gone/x/y/z.txt": "z", "ren-then-del/f": "f",
	}
	for rel, data := range files {
		p := filepath.Join(ws, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	w := &workspace.Workspace{Dir: ws}
	before, err := w.Snapshot(workspace.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	res := execute(t, sb, program{lang: "python", ws: ws, code: `
import hashlib, json, os, shutil, stat
os.rename('dir', 'moved')
os.rename('moved/sub', 'subout')
os.remove('del.txt')
with open('over.txt', 'w') as f:
    f.write('new')
with open('app.txt', 'a') as f:
    f.write('+more')
os.symlink('in.txt', 'sym')
os.symlink('/etc/passwd', 'abs-sym')
os.chmod('mode.txt', 0o600)
os.chmod('moved', 0o750)
os.link('link-src.txt', 'link-dst.txt')
os.remove('file2dir')
os.mkdir('file2dir')
open('file2dir/x', 'w').write('x')
shutil.rmtree('dir2file')
open('dir2file', 'w').write('was a directory')
os.makedirs('new/a/b')
open('new/a/b/c.txt', 'w').write('c')
os.rename('keep.txt', 'kept.txt')
os.rename('swap1', 'tmp')
os.rename('swap2', 'swap1')
os.rename('tmp', 'swap2')
shutil.rmtree('gone')
os.rename('ren-then-del', 'rtd')
shutil.rmtree('rtd')
view = {}
for dp, dns, fns in os.walk('.'):
    for n in dns + fns:
        p = os.path.join(dp, n)
        st = os.lstat(p)
        rel = os.path.relpath(p, '.')
        if stat.S_ISLNK(st.st_mode):
            view[rel] = 'link ' + os.readlink(p)
        elif stat.S_ISDIR(st.st_mode):
            view[rel] = 'dir %o' % (st.st_mode & 0o777)
        elif stat.S_ISREG(st.st_mode):
            view[rel] = 'file %o %s' % (st.st_mode & 0o777, hashlib.sha256(open(p, 'rb').read()).hexdigest())
        else:
            view[rel] = 'other'
print(json.dumps(view, sort_keys=True))
`})
	wantStatus(t, res, sandbox.StatusOK)
	var inside map[string]string
	if err := json.Unmarshal(res.Stdout, &inside); err != nil {
		t.Fatalf("the program's view: %v\n%s\n%s", err, res.Stdout, res.Stderr)
	}
	host := hostView(t, ws)
	if diff := ViewDiff(inside, host); diff != "" {
		t.Errorf("the host's workspace differs from what the program saw (inside / host):\n%s", diff)
	}
	for rel, want := range map[string]string{
		"over.txt": "new", "app.txt": "start+more", "link-dst.txt": "shared", "moved/g.txt": "g",
		"subout/f.txt": "f", "file2dir/x": "x", "dir2file": "was a directory", "kept.txt": "keep",
		"swap1/b.txt": "2", "swap2/a.txt": "1", "new/a/b/c.txt": "c",
	} {
		if got, err := os.ReadFile(filepath.Join(ws, rel)); err != nil || string(got) != want {
			t.Errorf("%s: %q (%v), want %q", rel, got, err, want)
		}
	}
	for _, rel := range []string{"dir", "del.txt", "keep.txt", "gone", "ren-then-del", "rtd", "tmp", "moved/sub"} {
		if fileExists(filepath.Join(ws, rel)) {
			t.Errorf("%s is still in the workspace", rel)
		}
	}
	if target, err := os.Readlink(filepath.Join(ws, "abs-sym")); err != nil || target != "/etc/passwd" {
		t.Errorf("abs-sym: %q %v", target, err)
	}
	arts, _, err := w.Changes(before, workspace.Limits{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range arts {
		// A hard link changes the file's ctime, which a copying backend
		// may take for a change of the file (the Docker backend does).
		if a.Path != "link-src.txt" || a.Change != "changed" {
			got = append(got, a.Change+" "+a.Path)
		}
	}
	want := []string{"changed app.txt", "new dir2file", "new file2dir/x", "new kept.txt", "new link-dst.txt",
		"changed mode.txt", "new moved/g.txt", "new new/a/b/c.txt", "changed over.txt", "new subout/f.txt",
		"new swap1/b.txt", "new swap2/a.txt"}
	if strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Errorf("artifacts:\n got %s\nwant %s", strings.Join(got, ", "), strings.Join(want, ", "))
	}
}

// hostView describes the tree below dir as the program of workspaceEdits
// does.
func hostView(t *testing.T, dir string) map[string]string {
	t.Helper()
	view := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			view[rel] = "link " + target
		case fi.IsDir():
			view[rel] = fmt.Sprintf("dir %o", fi.Mode().Perm())
		case fi.Mode().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(data)
			view[rel] = fmt.Sprintf("file %o %s", fi.Mode().Perm(), hex.EncodeToString(sum[:]))
		default:
			view[rel] = "other"
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return view
}

// ViewDiff lists the keys on which two views of a tree (path to a
// description) differ, one line each with both values.
func ViewDiff(a, b map[string]string) string {
	keys := map[string]bool{}
	for k := range a {
		keys[k] = true
	}
	for k := range b {
		keys[k] = true
	}
	var sorted []string
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	var out strings.Builder
	for _, k := range sorted {
		if a[k] != b[k] {
			fmt.Fprintf(&out, "  %s: %q / %q\n", k, a[k], b[k])
		}
	}
	return out.String()
}
