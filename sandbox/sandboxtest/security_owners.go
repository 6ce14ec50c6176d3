package sandboxtest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/codeagent/codeagent/sandbox"
)

// Ids the ownership tests give workspace entries when run as root: an
// owner of the workspace who is not the caller, and a colleague whose
// group shares a directory.
const (
	ownerUID     = 1234
	colleagueUID = 5678
	aclUID       = 4321 // named in an ACL only
)

// entryMeta is what a program must not change of a workspace entry it
// did not mean to change: owner, group, mode (type and all 07777 bits)
// and extended attributes (POSIX ACLs included), as the host sees them.
type entryMeta struct {
	uid, gid int
	mode     uint32
	xattrs   string
}

func (m entryMeta) String() string {
	return fmt.Sprintf("%d:%d %#o [%s]", m.uid, m.gid, m.mode, m.xattrs)
}

// metaOf reads p's metadata without following a link.
func metaOf(t *testing.T, p string) entryMeta {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	m := entryMeta{uid: int(st.Uid), gid: int(st.Gid), mode: st.Mode}
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		return m
	}
	var attrs []string
	for _, name := range xattrNames(p) {
		buf := make([]byte, 4096)
		n, err := unix.Lgetxattr(p, name, buf)
		if err != nil {
			t.Fatalf("read %s of %s: %v", name, p, err)
		}
		attrs = append(attrs, fmt.Sprintf("%s=%x", name, buf[:n]))
	}
	sort.Strings(attrs)
	m.xattrs = strings.Join(attrs, " ")
	return m
}

// treeMeta is the metadata of every entry below dir, by relative path.
func treeMeta(t *testing.T, dir string) map[string]entryMeta {
	t.Helper()
	out := map[string]entryMeta{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != dir {
			rel, _ := filepath.Rel(dir, p)
			out[rel] = metaOf(t, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// posixACL is the system.posix_acl_access value of an ACL that gives the
// owner and the owning group rw, user aclUID r and others r: mode 0664.
func posixACL() []byte {
	const undefined = 0xffffffff
	entries := []struct {
		tag, perm uint16
		id        uint32
	}{{0x01, 6, undefined}, {0x02, 4, aclUID}, {0x04, 6, undefined}, {0x10, 6, undefined}, {0x20, 4, undefined}}
	b := binary.LittleEndian.AppendUint32(nil, 2) // POSIX_ACL_XATTR_VERSION
	for _, e := range entries {
		b = binary.LittleEndian.AppendUint16(b, e.tag)
		b = binary.LittleEndian.AppendUint16(b, e.perm)
		b = binary.LittleEndian.AppendUint32(b, e.id)
	}
	return b
}

// ownedWorkspace makes a workspace as a user's project looks: owned by
// ownerUID when root (else by the caller), mode 0755, in a directory that
// others may search (so that git can run as the owner), and returns it.
func ownedWorkspace(t *testing.T) string {
	t.Helper()
	base, err := os.MkdirTemp("", "codeagent-owners-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(base) })
	ws := filepath.Join(base, "project")
	for _, d := range []string{base, ws} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return ws
}

// chownAll gives every entry of dir (dir included) to uid:gid, when root.
func chownAll(t *testing.T, dir string, uid, gid int) {
	t.Helper()
	if os.Geteuid() != 0 {
		return
	}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// workspaceOwnership runs a program that edits a user's project: it reads
// files, changes two (one in a directory shared through a setgid group),
// creates files and directories, chmods a new file 0777, an existing file
// +x, a directory 0777 and /workspace itself 0777. Afterwards every entry
// it did not mean to change keeps its owner, group, mode, ACL and
// extended attributes; the +x stays; the workspace directory is as it
// was; new entries belong to the workspace's owner (with the shared
// directory's group inside it) and nobody else may write them; and git,
// run as the project's owner, sees exactly the program's changes.
func workspaceOwnership(t *testing.T, sb sandbox.Sandbox) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	root := os.Geteuid() == 0
	ws := ownedWorkspace(t)
	files := map[string]string{
		"readme.txt": "read me\n", "notes.txt": "notes\n", "other.txt": "a colleague's\n",
		"script.sh": "echo hi\n", "sub/inner.txt": "inner\n", "shared/data.txt": "shared data\n",
		"repo/code.py": "print(1)\n",
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
	git := func(args ...string) string {
		t.Helper()
		out, err := gitAs(filepath.Join(ws, "repo"), root, args...)
		if err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	// The repository is made by its owner, as a user makes one.
	chownAll(t, ws, ownerUID, ownerUID)
	git("init", "-q")
	git("config", "user.name", "Owner")
	git("config", "user.email", "owner@example.test")
	git("add", "code.py")
	git("commit", "-q", "-m", "first")
	if root {
		// A colleague's file, which the program only reads; and the
		// owner's directory and file shared with the colleague's group.
		// A program acts as the workspace's owner (and group): what it may
		// change is what they may (see docs/ARCHITECTURE.md).
		if err := os.Lchown(filepath.Join(ws, "other.txt"), colleagueUID, colleagueUID); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{"shared", "shared/data.txt"} {
			if err := os.Lchown(filepath.Join(ws, p), ownerUID, colleagueUID); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The shared directory: setgid, group-writable; its file group-writable.
	if err := os.Chmod(filepath.Join(ws, "shared"), 0o775|fs.ModeSetgid); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(ws, "shared/data.txt"), 0o664); err != nil {
		t.Fatal(err)
	}
	if err := unix.Setxattr(filepath.Join(ws, "shared/data.txt"), "system.posix_acl_access", posixACL(), 0); err != nil {
		t.Logf("no POSIX ACL on this file system (%v); not checked", err)
	}
	if err := unix.Setxattr(filepath.Join(ws, "notes.txt"), "user.origin", []byte("host"), 0); err != nil {
		t.Logf("no user extended attributes on this file system (%v); not checked", err)
	}
	wsBefore := metaOf(t, ws)
	before := treeMeta(t, ws)
	res := execute(t, sb, program{lang: "python", ws: ws, code: `
import os
assert open("readme.txt").read() == "read me\n"
assert open("other.txt").read() == "a colleague's\n"
with open("notes.txt", "a") as f:
    f.write("more\n")
with open("shared/data.txt", "w") as f:
    f.write("changed\n")
open("new.txt", "w").write("new\n")
os.mkdir("newdir")
open("newdir/f.txt", "w").write("f\n")
open("shared/new.txt", "w").write("n\n")
os.mkdir("shared/newdir")
open("shared/newdir/g.txt", "w").write("g\n")
open("wide.txt", "w").write("w\n")
os.chmod("wide.txt", 0o777)
os.chmod("script.sh", os.stat("script.sh").st_mode | 0o111)
os.chmod("sub", 0o777)
try:
    os.chmod("/workspace", 0o777)  # a backend may refuse it; it must not come back
except OSError:
    pass
with open("repo/code.py", "w") as f:
    f.write("print(2)\n")
open("repo/new.py", "w").write("print(3)\n")
print("done")
`})
	wantStatus(t, res, sandbox.StatusOK)

	if got := metaOf(t, ws); got != wsBefore {
		t.Errorf("the workspace directory is %v, was %v", got, wsBefore)
	}
	after := treeMeta(t, ws)
	for rel, was := range before {
		got, ok := after[rel]
		if !ok {
			t.Errorf("%s is gone", rel)
			continue
		}
		want := was
		if rel == "script.sh" {
			want.mode = was.mode | 0o111 // the program's chmod +x
		}
		if got != want {
			t.Errorf("%s is %v, was %v (want %v)", rel, got, was, want)
		}
	}
	owner := wsBefore.uid
	for rel, got := range after {
		if _, existed := before[rel]; existed {
			continue
		}
		wantGID := wsBefore.gid
		if strings.HasPrefix(rel, "shared/") {
			wantGID = before["shared"].gid
		}
		if got.uid != owner || got.gid != wantGID {
			t.Errorf("new %s belongs to %d:%d, want %d:%d", rel, got.uid, got.gid, owner, wantGID)
		}
		if got.mode&0o022 != 0 || got.mode&(unix.S_ISUID|unix.S_ISVTX) != 0 {
			t.Errorf("new %s has mode %#o: others may write it, or it is setuid or sticky", rel, got.mode)
		}
		if isSetgid := got.mode&unix.S_ISGID != 0; isSetgid != (rel == "shared/newdir") {
			t.Errorf("new %s has mode %#o: setgid %v, want %v (only a directory made in a setgid one)", rel, got.mode, isSetgid, !isSetgid)
		}
	}
	for _, rel := range []string{"new.txt", "newdir/f.txt", "shared/newdir/g.txt", "wide.txt", "repo/new.py"} {
		if _, ok := after[rel]; !ok {
			t.Errorf("%s did not come back", rel)
		}
	}
	if status := git("status", "--porcelain"); status != " M code.py\n?? new.py\n" {
		t.Errorf("git status --porcelain as the repository's owner:\n%s\nwant the program's changes only", status)
	}
}

// gitAs runs git in dir as the owner of dir (when root and it is someone
// else), with no configuration but the repository's.
func gitAs(dir string, root bool, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent", "GIT_CONFIG_NOSYSTEM=1", "LC_ALL=C"}
	if root {
		var st syscall.Stat_t
		if err := syscall.Stat(dir, &st); err != nil {
			return "", err
		}
		if st.Uid != 0 {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: st.Uid, Gid: st.Gid, Groups: []uint32{}}}
		}
	}
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		err = fmt.Errorf("exit %d", ee.ExitCode())
	}
	return string(out), err
}

// worldWritable has a program open its whole workspace to everyone:
// chmod 0777 on /workspace, on every existing directory and file, and on
// the directories and files it makes. Afterwards no entry of the
// workspace, nor the workspace, may be group- or other-writable unless it
// was before: a program must not open the user's project to other local
// users.
func worldWritable(t *testing.T, sb sandbox.Sandbox) {
	ws := ownedWorkspace(t)
	for _, rel := range []string{"a/b/c.txt", "a/d.txt", "top.txt", "team/t.txt"} {
		p := filepath.Join(ws, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(rel), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A directory the user made group-writable keeps that.
	if err := os.Chmod(filepath.Join(ws, "team"), 0o775); err != nil {
		t.Fatal(err)
	}
	chownAll(t, ws, ownerUID, ownerUID)
	wsBefore := metaOf(t, ws)
	before := treeMeta(t, ws)
	res := execute(t, sb, program{lang: "python", ws: ws, code: `
import os
os.umask(0)
os.makedirs("new/deep", 0o777)
open("new/deep/f", "w").write("x")
open("new.txt", "w").write("x")
open("a/b/new.txt", "w").write("x")
n = 0
for d, dirs, files in os.walk("/workspace"):
    for p in [d] + [os.path.join(d, f) for f in files]:
        try:
            os.chmod(p, 0o777)
            n += 1
        except OSError:
            pass
print("opened", n)
`})
	wantStatus(t, res, sandbox.StatusOK)
	t.Logf("%s", strings.TrimSpace(string(res.Stdout)))
	if got := metaOf(t, ws); got != wsBefore {
		t.Errorf("the workspace directory is %v, was %v", got, wsBefore)
	}
	after := treeMeta(t, ws)
	for _, rel := range []string{"new/deep/f", "new.txt", "a/b/new.txt"} {
		if _, ok := after[rel]; !ok {
			t.Errorf("%s did not come back", rel)
		}
	}
	for rel, got := range after {
		if w := got.mode & 0o022; w != 0 && w&^before[rel].mode != 0 {
			t.Errorf("%s is group- or other-writable (mode %#o; before: %v)", rel, got.mode, before[rel])
		}
	}
}
