//go:build linux && (amd64 || arm64)

package namespace

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/sandbox/sandboxtest"
)

// The merge tests run programs on an overlay workspace (codeagent as root)
// and check that afterwards the host's workspace is what the program saw
// at its end: every entry's kind, permission bits, content, link target
// and modification time, and which names are hard links of one file; and
// that the merge follows no link, gives everything the program's uid and
// leaves what the program did not touch alone.

// viewPrelude prints the program's view of /workspace as JSON: see
// hostMergeView.
const viewPrelude = `
import hashlib, json, os, stat
def view():
    out, inodes = {}, {}
    for dp, dns, fns in os.walk('.'):
        for n in dns + fns:
            p = os.path.join(dp, n)
            st = os.lstat(p)
            rel = os.path.relpath(p, '.')
            if stat.S_ISLNK(st.st_mode):
                d = 'link ' + os.readlink(p)
            elif stat.S_ISDIR(st.st_mode):
                d = 'dir %o %d' % (st.st_mode & 0o777, st.st_mtime_ns)
            elif stat.S_ISREG(st.st_mode):
                d = 'file %o %d %d %s' % (st.st_mode & 0o777, st.st_size, st.st_mtime_ns, hashlib.sha256(open(p, 'rb').read()).hexdigest())
                if st.st_nlink > 1:
                    inodes.setdefault(st.st_ino, []).append(rel)
            elif stat.S_ISFIFO(st.st_mode):
                d = 'fifo %o' % (st.st_mode & 0o777)
            else:
                d = 'other'
            out[rel] = d
    for names in inodes.values():
        for n in (names if len(names) > 1 else []):
            out[n] += ' links ' + ','.join(sorted(names))
    return out
`

func overlayBackend(t *testing.T) *Backend {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("overlay workspaces need root")
	}
	b := newTestBackend(t)
	if b.ReactiveDisk() {
		t.Skip("no overlay workspaces on this host")
	}
	return b
}

func TestMerge(t *testing.T) {
	b := overlayBackend(t)
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("host"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, ws string)
		code  string
		check func(t *testing.T, ws string)
	}{{
		name:  "RenamedDirectories",
		setup: files("a/x/1", "a/y/2", "b/3", "c/d/e/4", "s1/5", "s2/6", "back/7", "gone/8", "deep/1/2/3/4/5/6/7/8/9"),
		code: `
os.rename('a', 'a2')                 # renamed in place
os.rename('a2/x', 'x2')              # moved to another parent: absolute redirect
os.rename('x2', 'b/x3')              # and again, into another of the workspace's directories
os.mkdir('a')                        # a new directory where a renamed one was
open('a/new', 'w').write('n')
os.rename('s1', 't'); os.rename('s2', 's1'); os.rename('t', 's2')  # swapped
os.rename('back', 'away'); os.rename('away', 'back')               # and back
os.rename('gone', 'g2'); shutil.rmtree('g2')                       # renamed, then removed
os.makedirs('n1/n2')
os.rename('c/d', 'n1/n2/d')          # into a new directory
open('n1/n2/d/e/5', 'w').write('5')  # then written below
os.rename('deep/1/2/3/4', 'deep4')
os.rename('deep', 'shallow')
`,
		check: func(t *testing.T, ws string) {
			for rel, want := range map[string]string{"a2/y/2": "a/y/2", "b/x3/1": "a/x/1", "s1/6": "s2/6", "s2/5": "s1/5",
				"back/7": "back/7", "n1/n2/d/e/4": "c/d/e/4", "deep4/5/6/7/8/9": "deep/1/2/3/4/5/6/7/8/9"} {
				wantContent(t, ws, rel, want)
			}
			for _, rel := range []string{"gone", "g2", "c/d", "deep", "shallow/1/2/3/4"} {
				wantGone(t, ws, rel)
			}
		},
	}, {
		name:  "HardLinks",
		setup: files("in.txt", "pair-a"),
		code: `
os.link('pair-a', 'pair-b-new')   # a hard link to an input (the input is copied up)
open('n', 'w').write('new')
os.link('n', 'n2')                # hard links among new files
os.makedirs('sub')
os.link('n', 'sub/n3')
`,
		check: func(t *testing.T, ws string) {
			sameFile(t, ws, "pair-a", "pair-b-new")
			sameFile(t, ws, "n", "n2")
			sameFile(t, ws, "n", "sub/n3")
		},
	}, {
		name: "SplitInputLinks",
		setup: func(t *testing.T, ws string) {
			files("a")(t, ws)
			if err := os.Link(filepath.Join(ws, "a"), filepath.Join(ws, "b")); err != nil {
				t.Fatal(err)
			}
		},
		// Overlayfs copies a changed file up alone: its other names keep
		// the old content (index=off), in the sandbox and afterwards.
		code: `open('a', 'a').write('+more')`,
		check: func(t *testing.T, ws string) {
			wantContent(t, ws, "b", "a")
			wantContent(t, ws, "a", "a+more")
		},
	}, {
		name: "KindsModesTimes",
		setup: func(t *testing.T, ws string) {
			files("in.txt", "dir/f", "to-dir", "to-file/f", "opaque/old")(t, ws)
			if err := os.Chmod(ws, 0o700); err != nil {
				t.Fatal(err)
			}
		},
		code: `
os.chmod('in.txt', 0o600)
os.chmod('dir', 0o700)
os.utime('dir/f', ns=(1_000_000_000_123, 2_000_000_000_456))
os.mkfifo('fifo', 0o640)
os.symlink('/etc/passwd', 'abs')
os.symlink('../in.txt', 'dir/rel')
os.remove('to-dir'); os.mkdir('to-dir'); open('to-dir/x', 'w').write('x')
shutil.rmtree('to-file'); open('to-file', 'w').write('f')
shutil.rmtree('opaque'); os.mkdir('opaque'); open('opaque/new', 'w').write('new')
with open('sparse', 'wb') as f:
    f.seek(50 << 20)
    f.write(b'end')
os.chmod('.', 0o750)
`,
		check: func(t *testing.T, ws string) {
			wantGone(t, ws, "opaque/old")
			fi, err := os.Stat(filepath.Join(ws, "sparse"))
			if err != nil {
				t.Fatal(err)
			}
			if blocks := fi.Sys().(*syscall.Stat_t).Blocks * 512; blocks > 1<<20 {
				t.Errorf("the sparse file takes %d bytes on the host", blocks)
			}
			// A program never changes its workspace directory's own mode.
			if fi, err := os.Stat(ws); err != nil || fi.Mode().Perm() != 0o700 {
				t.Errorf("the workspace's root: %v %v, want its mode 0700 kept", fi.Mode(), err)
			}
		},
	}, {
		name: "LinksNotFollowed",
		setup: func(t *testing.T, ws string) {
			files("f")(t, ws)
			for _, l := range []string{"evil", "evil2"} {
				if err := os.Symlink(outside, filepath.Join(ws, l)); err != nil {
					t.Fatal(err)
				}
			}
		},
		code: `
os.remove('evil'); os.mkdir('evil'); open('evil/secret', 'w').write('program')
os.remove('evil2'); open('evil2', 'w').write('file')
`,
		check: func(t *testing.T, ws string) {
			if got, _ := os.ReadFile(filepath.Join(outside, "secret")); string(got) != "host" {
				t.Errorf("the directory outside the workspace was written: %q", got)
			}
			if entries, _ := os.ReadDir(outside); len(entries) != 1 {
				t.Errorf("the directory outside the workspace has %d entries", len(entries))
			}
		},
	}, {
		name:  "Untouched",
		setup: files("a", "d/b", "d/e/c"),
		code:  `open('a').read(); os.listdir('d'); os.stat('d/e/c')`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			ws := t.TempDir()
			if tc.setup != nil {
				tc.setup(t, ws)
			}
			before := inodes(t, ws)
			res := runPython(t, b, ws, "import os, shutil\n"+tc.code+"\n"+viewPrelude+"print(json.dumps(view(), sort_keys=True))\n")
			var inside map[string]string
			if err := json.Unmarshal(res.Stdout, &inside); err != nil {
				t.Fatalf("%s: the program's view: %v\n%s\n%s", res.Status, err, res.Stdout, res.Stderr)
			}
			host := hostMergeView(t, ws)
			if diff := sandboxtest.ViewDiff(inside, host); diff != "" {
				t.Errorf("the host's workspace differs from what the program saw (inside / host):\n%s", diff)
			}
			if tc.name == "Untouched" {
				after := inodes(t, ws)
				for rel, ino := range before {
					if after[rel] != ino {
						t.Errorf("%s was rewritten though the program only read it", rel)
					}
				}
			}
			walkOwners(t, ws, 0) // the workspace's owner, root
			if tc.check != nil {
				tc.check(t, ws)
			}
		})
	}
}

// files makes each path below ws (directories as needed) with its own path
// as content.
func files(paths ...string) func(t *testing.T, ws string) {
	return func(t *testing.T, ws string) {
		for _, rel := range paths {
			p := filepath.Join(ws, rel)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(rel), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func runPython(t *testing.T, b *Backend, ws, code string) sandbox.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := b.Run(ctx, sandbox.Spec{Command: []string{"python3", "/code/main.py"}, Workspace: ws,
		Files: []sandbox.File{{Path: "/code/main.py", Data: []byte(code)}}})
	if err != nil || res.Status != sandbox.StatusOK {
		t.Fatalf("run: %v %s %s\n%s", err, res.Status, res.Message, res.Stderr)
	}
	return res
}

// hostMergeView describes the tree below dir as viewPrelude does.
func hostMergeView(t *testing.T, dir string) map[string]string {
	t.Helper()
	view := map[string]string{}
	links := map[uint64][]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			view[rel] = "link " + target
		case fi.IsDir():
			view[rel] = fmt.Sprintf("dir %o %d", fi.Mode().Perm(), st.Mtim.Nano())
		case fi.Mode().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(data)
			view[rel] = fmt.Sprintf("file %o %d %d %s", fi.Mode().Perm(), fi.Size(), st.Mtim.Nano(), hex.EncodeToString(sum[:]))
			if st.Nlink > 1 {
				links[st.Ino] = append(links[st.Ino], rel)
			}
		case fi.Mode()&fs.ModeNamedPipe != 0:
			view[rel] = fmt.Sprintf("fifo %o", fi.Mode().Perm())
		default:
			view[rel] = "other"
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, names := range links {
		if len(names) < 2 {
			continue
		}
		sort.Strings(names)
		for _, n := range names {
			view[n] += " links " + strings.Join(names, ",")
		}
	}
	return view
}

// inodes maps each path below dir to its inode number.
func inodes(t *testing.T, dir string) map[string]uint64 {
	t.Helper()
	out := map[string]uint64{}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil {
			if fi, err := os.Lstat(p); err == nil {
				rel, _ := filepath.Rel(dir, p)
				out[rel] = fi.Sys().(*syscall.Stat_t).Ino
			}
		}
		return nil
	})
	return out
}

// walkOwners fails on any entry below dir not owned by uid (user and
// group), with a setuid or setgid bit, or an extended attribute.
func walkOwners(t *testing.T, dir string, uid int) {
	t.Helper()
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return nil
		}
		st := fi.Sys().(*syscall.Stat_t)
		if int(st.Uid) != uid || int(st.Gid) != uid {
			t.Errorf("%s belongs to %d:%d, want %d", p, st.Uid, st.Gid, uid)
		}
		if fi.Mode()&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky) != 0 {
			t.Errorf("%s is %v", p, fi.Mode())
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			if n, _ := syscall.Listxattr(p, make([]byte, 1024)); n > 0 {
				buf := make([]byte, n)
				n, _ = syscall.Listxattr(p, buf)
				for _, a := range strings.Split(strings.TrimRight(string(buf[:n]), "\x00"), "\x00") {
					if a != "trusted.codeagent.workspace" {
						t.Errorf("%s has the attribute %s", p, a)
					}
				}
			}
		}
		return nil
	})
}

func wantContent(t *testing.T, ws, rel, want string) {
	t.Helper()
	if got, err := os.ReadFile(filepath.Join(ws, rel)); err != nil || string(got) != want {
		t.Errorf("%s: %q (%v), want %q", rel, got, err, want)
	}
}

func wantGone(t *testing.T, ws, rel string) {
	t.Helper()
	if _, err := os.Lstat(filepath.Join(ws, rel)); err == nil {
		t.Errorf("%s is still in the workspace", rel)
	}
}

func sameFile(t *testing.T, ws, a, b string) {
	t.Helper()
	fa, err1 := os.Lstat(filepath.Join(ws, a))
	fb, err2 := os.Lstat(filepath.Join(ws, b))
	if err1 != nil || err2 != nil || !os.SameFile(fa, fb) {
		t.Errorf("%s and %s are not one file (%v %v)", a, b, err1, err2)
	}
}

// BenchmarkMerge merges an upper layer of 19 directories of 1000 empty
// files each, and one of nothing, into empty workspaces.
func BenchmarkMerge(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("the merge gives entries to the program's uid: root only")
	}
	for _, n := range []int{0, 19} {
		b.Run(fmt.Sprintf("dirs%d", n), func(b *testing.B) {
			upper := b.TempDir()
			for d := range n {
				dir := filepath.Join(upper, "e", fmt.Sprint(d))
				if err := os.MkdirAll(dir, 0o755); err != nil {
					b.Fatal(err)
				}
				for i := range 1000 {
					if err := os.WriteFile(filepath.Join(dir, fmt.Sprint(i)), nil, 0o644); err != nil {
						b.Fatal(err)
					}
				}
			}
			uf, err := os.Open(upper)
			if err != nil {
				b.Fatal(err)
			}
			defer uf.Close()
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				ws := b.TempDir()
				wf, err := os.Open(ws)
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				if err := mergeUpper(uf, wf); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				wf.Close()
				b.StartTimer()
			}
		})
	}
}
