package docker

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/moby/moby/client"
	"golang.org/x/sys/unix"

	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/sandbox/internal/backendkit"
)

// Ids the tests give workspace entries when root.
const (
	testOwner     = 1234
	testColleague = 5678
)

// statOf returns p's owner, group and mode bits (0o7777).
func statOf(t *testing.T, p string) (uid, gid int, mode uint32) {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	return int(st.Uid), int(st.Gid), st.Mode & 0o7777
}

// stagingUID is the uid stageIn gives the copies: the caller's own when
// root (as if the program ran as root), else -1 (opened up).
func stagingUID() int {
	if os.Geteuid() == 0 {
		return 0
	}
	return -1
}

// TestStageOutRule: what the copy back gives the workspace follows
// package wsperm. The workspace directory is left as it is even when the
// program chmods it 0777; an existing file the program rewrote keeps its
// inode, owner, group, mode and extended attributes; a directory chmodded
// 0777 stays 0755; a new file belongs to the workspace's owner, and
// chmodded 0777 comes back 0755; new entries in a setgid directory take
// its group, and a new directory there is setgid.
func TestStageOutRule(t *testing.T) {
	root := os.Geteuid() == 0
	ws, st := t.TempDir(), filepath.Join(t.TempDir(), "ws")
	if err := os.Mkdir(st, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(ws, "kept.txt"), "old")
	write(t, filepath.Join(ws, "dir/f.txt"), "f")
	write(t, filepath.Join(ws, "shared/s.txt"), "s")
	if err := os.Chmod(filepath.Join(ws, "kept.txt"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(ws, "shared"), 0o775|fs.ModeSetgid); err != nil {
		t.Fatal(err)
	}
	xattr := unix.Setxattr(filepath.Join(ws, "kept.txt"), "user.origin", []byte("host"), 0) == nil
	wsUID, wsGID := os.Getuid(), os.Getgid()
	sharedGID := os.Getgid()
	if root {
		wsUID, wsGID, sharedGID = testOwner, testOwner, testColleague
		for p, id := range map[string]int{".": testOwner, "dir": testOwner, "dir/f.txt": testOwner, "kept.txt": testColleague, "shared": testColleague, "shared/s.txt": testColleague} {
			if err := os.Lchown(filepath.Join(ws, p), id, id); err != nil {
				t.Fatal(err)
			}
		}
	}
	keptIno := inode(t, filepath.Join(ws, "kept.txt"))
	keptUID, keptGID, keptMode := statOf(t, filepath.Join(ws, "kept.txt"))
	snap, err := stageIn(ws, st, stagingUID())
	if err != nil {
		t.Fatal(err)
	}
	// The program: what it sets is in modes, as handBack reports it.
	modes := map[string]fs.FileMode{}
	chmod := func(rel string, m fs.FileMode) {
		if err := os.Chmod(filepath.Join(st, rel), m); err != nil {
			t.Fatal(err)
		}
		modes[rel] = m
	}
	if err := os.WriteFile(filepath.Join(st, "kept.txt"), []byte("new"), 0); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(st, "new.txt"), "n")
	chmod("new.txt", 0o777)
	chmod("dir", 0o777)
	write(t, filepath.Join(st, "shared/new.txt"), "n")
	modes["shared/new.txt"] = 0o644
	if err := os.Mkdir(filepath.Join(st, "shared/sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	modes["shared/sub"] = 0o755
	if err := os.Chmod(st, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := stageOut(st, ws, snap, modes); err != nil {
		t.Fatal(err)
	}

	if uid, gid, mode := statOf(t, ws); uid != wsUID || gid != wsGID || mode != 0o755 {
		t.Errorf("the workspace directory is %d:%d %#o, want %d:%d 0755", uid, gid, mode, wsUID, wsGID)
	}
	kept := filepath.Join(ws, "kept.txt")
	if b, _ := os.ReadFile(kept); string(b) != "new" {
		t.Errorf("kept.txt = %q, want the program's content", b)
	}
	if uid, gid, mode := statOf(t, kept); uid != keptUID || gid != keptGID || mode != keptMode || inode(t, kept) != keptIno {
		t.Errorf("kept.txt is %d:%d %#o, inode changed %v; was %d:%d %#o", uid, gid, mode, inode(t, kept) != keptIno, keptUID, keptGID, keptMode)
	}
	if buf := make([]byte, 16); xattr {
		if n, err := unix.Getxattr(kept, "user.origin", buf); err != nil || string(buf[:n]) != "host" {
			t.Errorf("kept.txt lost its extended attribute: %q %v", buf[:n], err)
		}
	}
	for rel, want := range map[string]struct {
		uid, gid int
		mode     uint32
	}{
		"dir":            {wsUID, wsGID, 0o755},
		"new.txt":        {wsUID, wsGID, 0o755},
		"shared/new.txt": {wsUID, sharedGID, 0o644},
		"shared/sub":     {wsUID, sharedGID, 0o2755},
	} {
		uid, gid, mode := statOf(t, filepath.Join(ws, rel))
		if !root {
			want.uid, uid = 0, 0 // not root: codeagent's own, not chowned
		}
		if uid != want.uid || gid != want.gid || mode != want.mode {
			t.Errorf("%s is %d:%d %#o, want %d:%d %#o", rel, uid, gid, mode, want.uid, want.gid, want.mode)
		}
	}
}

func inode(t *testing.T, p string) uint64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

// TestStageSkipsMounts: a file system mounted below the workspace is
// neither staged nor written or emptied by the copy back, whatever the
// program leaves in its place: an entry of the same name, one below it,
// or the removal of the directory that holds it.
func TestStageSkipsMounts(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounts a file system")
	}
	ws, st := t.TempDir(), filepath.Join(t.TempDir(), "ws")
	if err := os.Mkdir(st, 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(ws, "mine.txt"), "mine")
	for _, m := range []string{"mnt", "data/mnt"} {
		p := filepath.Join(ws, m)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := unix.Mount("tmpfs", p, "tmpfs", 0, "size=1m"); err != nil {
			t.Skipf("mount tmpfs: %v", err)
		}
		t.Cleanup(func() { _ = unix.Unmount(p, unix.MNT_DETACH) })
		write(t, filepath.Join(p, "secret"), "another file system's")
	}
	snap, err := stageIn(ws, st, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, rel := range []string{"mnt", "data/mnt"} {
		if fileExists(filepath.Join(st, rel)) {
			t.Errorf("%s, on another file system, was staged", rel)
		}
	}
	if !fileExists(filepath.Join(st, "mine.txt")) {
		t.Fatal("the workspace was not staged")
	}
	// The program plants entries where the mounts are and removes data.
	write(t, filepath.Join(st, "mnt/planted"), "planted")
	if err := os.RemoveAll(filepath.Join(st, "data")); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(st, "data"), "a file now")
	write(t, filepath.Join(st, "new.txt"), "new")
	if err := stageOut(st, ws, snap, nil); err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"mnt", "data/mnt"} {
		if b, err := os.ReadFile(filepath.Join(ws, m, "secret")); err != nil || string(b) != "another file system's" {
			t.Errorf("%s/secret after the copy back: %q %v", m, b, err)
		}
	}
	if fileExists(filepath.Join(ws, "mnt/planted")) {
		t.Error("the copy back wrote into a file system mounted below the workspace")
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "new.txt")); string(b) != "new" {
		t.Errorf("new.txt = %q: the rest was not copied back", b)
	}
}

// TestHostUIDPerBox: run by root, boxes created at once run as different
// host uids of codeagent's range (their programs too), and a box's uid
// goes back to the pool only once its container is removed: not when the
// removal failed, and not before the removal is asked.
func TestHostUIDPerBox(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("run as an ordinary user, every container runs as Config.HostUID")
	}
	b := newTestBackend(t, Config{})
	defer b.Close()
	c := classOf(sandbox.DefaultLimits(), b.cfg)
	boxes := make([]*box, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range boxes {
		wg.Go(func() { boxes[i], errs[i] = b.createBox(context.Background(), c, nil) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	inUse := b.ids.InUse()
	for _, bx := range boxes {
		if bx.uid < backendkit.DefaultHostUID || bx.uid >= backendkit.DefaultHostUID+backendkit.HostUIDCount {
			t.Errorf("a box runs as uid %d, outside codeagent's range", bx.uid)
		}
		out, err := b.execOutput(context.Background(), bx, []string{"/usr/bin/env", "-i", "PATH=/usr/bin:/bin", "id", "-u"})
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSpace(string(out)); got != strconv.Itoa(bx.uid) {
			t.Errorf("a program of the box of uid %d runs as %s", bx.uid, got)
		}
	}
	if boxes[0].uid == boxes[1].uid {
		t.Fatalf("two boxes run as one host uid %d", boxes[0].uid)
	}
	// A removal that fails keeps the uid taken.
	failed := boxes[0]
	b.remove = func(context.Context, string) error { return errors.New("refused by the test") }
	b.destroy(failed)
	if n := b.ids.InUse(); n != inUse {
		t.Errorf("after a failed removal %d host uids are in use, want %d", n, inUse)
	}
	if err := b.removeContainer(context.Background(), failed.id); err != nil {
		t.Fatal(err)
	}
	b.releaseUID(failed) // now gone: not this process's to keep
	inUse--
	// A removal that succeeds gives it back, after the container is gone.
	var during int
	b.remove = func(ctx context.Context, id string) error {
		during = b.ids.InUse()
		return b.removeContainer(ctx, id)
	}
	b.destroy(boxes[1])
	if during != inUse {
		t.Errorf("while its container was removed %d host uids were in use, want %d", during, inUse)
	}
	if n := b.ids.InUse(); n != inUse-1 {
		t.Errorf("after the removal %d host uids are in use, want %d", n, inUse-1)
	}
	if _, err := b.cli.ContainerInspect(context.Background(), boxes[1].id, client.ContainerInspectOptions{}); !isNotFound(err) {
		t.Errorf("the container is still there: %v", err)
	}
	b.remove = b.removeContainer
}
