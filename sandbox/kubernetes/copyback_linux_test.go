package kubernetes

import (
	"encoding/binary"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// Ids the tests give workspace entries when root.
const (
	testOwner     = 1234
	testColleague = 5678
)

// agentAccount builds the frames the agent sends for a workspace.
type agentAccount []frame

func (a *agentAccount) dir(rel string, mode uint32) {
	*a = append(*a, frame{frameDir, append(binary.BigEndian.AppendUint32(nil, mode), rel...)})
}

func (a *agentAccount) file(rel string, mode uint32, data string) {
	h := binary.BigEndian.AppendUint32(nil, mode)
	h = binary.BigEndian.AppendUint64(h, uint64(len(data)))
	h = binary.BigEndian.AppendUint64(h, uint64((len(data)+4095)/4096*8))
	*a = append(*a, frame{frameFile, append(h, rel...)},
		frame{frameChunk, append(binary.BigEndian.AppendUint64(nil, 0), data...)}, frame{frameFileEnd, nil})
}

func (a *agentAccount) unchanged(rel string) { *a = append(*a, frame{frameUnchanged, []byte(rel)}) }

// copyBackAll applies the frames to ws, of which staged were sent.
func copyBackAll(t *testing.T, ws string, staged []string, frames agentAccount) {
	t.Helper()
	root, err := os.OpenRoot(ws)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	sent := map[string]bool{}
	for _, rel := range staged {
		sent[rel] = true
	}
	c, err := newCopyBack(root, sent, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range frames {
		if err := c.apply(f); err != nil {
			t.Fatalf("frame %c: %v", f.t, err)
		}
	}
	if err := c.finish(); err != nil {
		t.Fatal(err)
	}
}

func mkfile(t *testing.T, p, data string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

type owned struct {
	uid, gid int
	mode     uint32
	ino      uint64
}

func ownedOf(t *testing.T, p string) owned {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	return owned{int(st.Uid), int(st.Gid), st.Mode & 0o7777, st.Ino}
}

// TestCopyBackOwners: the copy back of the agent's account follows package
// wsperm. The workspace directory is never changed; an existing file the
// program rewrote keeps its inode, owner, group, mode and extended
// attributes; a directory the program chmodded 0777 stays 0755; a new
// file chmodded 0777 comes back 0755, owned by the workspace's owner; in a
// setgid directory new entries take its group and a new directory is
// setgid.
func TestCopyBackOwners(t *testing.T) {
	root := os.Geteuid() == 0
	ws := t.TempDir()
	if err := os.Chmod(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	mkfile(t, filepath.Join(ws, "kept.txt"), "old", 0o640)
	mkfile(t, filepath.Join(ws, "same.txt"), "same", 0o644)
	mkfile(t, filepath.Join(ws, "dir/f.txt"), "f", 0o644)
	mkfile(t, filepath.Join(ws, "shared/s.txt"), "s", 0o664)
	if err := os.Chmod(filepath.Join(ws, "shared"), 0o775|fs.ModeSetgid); err != nil {
		t.Fatal(err)
	}
	xattr := unix.Setxattr(filepath.Join(ws, "kept.txt"), "user.origin", []byte("host"), 0) == nil
	wsOwner, sharedGID := ownedOf(t, ws), os.Getgid()
	if root {
		for p, id := range map[string]int{".": testOwner, "dir": testOwner, "dir/f.txt": testOwner, "same.txt": testOwner,
			"kept.txt": testColleague, "shared": testColleague, "shared/s.txt": testColleague} {
			if err := os.Lchown(filepath.Join(ws, p), id, id); err != nil {
				t.Fatal(err)
			}
		}
		wsOwner, sharedGID = ownedOf(t, ws), testColleague
	}
	before := map[string]owned{}
	for _, rel := range []string{"kept.txt", "same.txt", "dir/f.txt", "shared", "shared/s.txt"} {
		before[rel] = ownedOf(t, filepath.Join(ws, rel))
	}
	var a agentAccount
	a.file("kept.txt", 0o640, "new") // rewritten, mode as it was
	a.unchanged("same.txt")
	a.dir("dir", 0o777) // chmod 0777
	a.unchanged("dir/f.txt")
	a.dir("shared", 0o775)
	a.unchanged("shared/s.txt")
	a.file("shared/new.txt", 0o644, "n")
	a.dir("shared/sub", 0o755)
	a.file("wide.txt", 0o777, "w")
	copyBackAll(t, ws, []string{"kept.txt", "same.txt", "dir", "dir/f.txt", "shared", "shared/s.txt"}, a)

	if got := ownedOf(t, ws); got != wsOwner {
		t.Errorf("the workspace directory is %+v, was %+v", got, wsOwner)
	}
	for rel, was := range before {
		if got := ownedOf(t, filepath.Join(ws, rel)); got != was {
			t.Errorf("%s is %+v, was %+v", rel, got, was)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "kept.txt")); string(b) != "new" {
		t.Errorf("kept.txt = %q, want the program's content", b)
	}
	if buf := make([]byte, 16); xattr {
		if n, err := unix.Getxattr(filepath.Join(ws, "kept.txt"), "user.origin", buf); err != nil || string(buf[:n]) != "host" {
			t.Errorf("kept.txt lost its extended attribute: %q %v", buf[:n], err)
		}
	}
	if got := ownedOf(t, filepath.Join(ws, "dir")); got.mode != 0o755 {
		t.Errorf("dir, chmodded 0777 by the program, is %#o, want 0755", got.mode)
	}
	for rel, want := range map[string]owned{
		"wide.txt":       {wsOwner.uid, wsOwner.gid, 0o755, 0},
		"shared/new.txt": {wsOwner.uid, sharedGID, 0o644, 0},
		"shared/sub":     {wsOwner.uid, sharedGID, 0o2755, 0},
	} {
		got := ownedOf(t, filepath.Join(ws, rel))
		got.ino = 0
		if got != want {
			t.Errorf("new %s is %+v, want %+v", rel, got, want)
		}
	}
}

// TestCopyBackSkipsMounts: the agent's account cannot reach a file
// system mounted below the workspace: entries it names there are left
// alone, and removing the directory that holds a mount does not empty it.
func TestCopyBackSkipsMounts(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounts a file system")
	}
	ws := t.TempDir()
	mkfile(t, filepath.Join(ws, "mine.txt"), "mine", 0o644)
	for _, m := range []string{"mnt", "data/mnt"} {
		p := filepath.Join(ws, m)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := unix.Mount("tmpfs", p, "tmpfs", 0, "size=1m"); err != nil {
			t.Skipf("mount tmpfs: %v", err)
		}
		t.Cleanup(func() { _ = unix.Unmount(p, unix.MNT_DETACH) })
		mkfile(t, filepath.Join(p, "secret"), "another file system's", 0o644)
	}
	fw := &frameWriter{w: discard{}}
	sent, err := stageIn(fw, ws, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, rel := range []string{"mnt", "data/mnt", "mnt/secret"} {
		if sent[rel] {
			t.Errorf("%s, on another file system, was sent to the Pod", rel)
		}
	}
	var staged []string
	for rel := range sent {
		staged = append(staged, rel)
	}
	// The Pod's account: entries where the mount is, a file in place of
	// the directory mnt, data removed.
	var a agentAccount
	a.unchanged("mine.txt")
	a.dir("mnt", 0o755)
	a.dir("mnt/sub", 0o755)
	a.file("mnt/sub/planted", 0o644, "planted")
	a.file("mnt/secret", 0o644, "overwritten")
	a.file("new.txt", 0o644, "new")
	copyBackAll(t, ws, staged, a)
	for _, m := range []string{"mnt", "data/mnt"} {
		if b, err := os.ReadFile(filepath.Join(ws, m, "secret")); err != nil || string(b) != "another file system's" {
			t.Errorf("%s/secret after the copy back: %q %v", m, b, err)
		}
	}
	if fileExists(filepath.Join(ws, "mnt/sub")) {
		t.Error("the copy back wrote into a file system mounted below the workspace")
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "new.txt")); string(b) != "new" {
		t.Errorf("new.txt = %q: the rest was not copied back", b)
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

func fileExists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}
