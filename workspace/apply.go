package workspace

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"unicode/utf8"

	udiff "github.com/aymanbagabas/go-udiff"
	"golang.org/x/sys/unix"

	"github.com/codeagent/codeagent/internal/nofollow"
	"github.com/codeagent/codeagent/sandbox"
)

// Apply brings changes (see FolderChanges) to the folder dir from the
// directory src that holds the new contents (the run's workspace, or kept
// changes), where base is what the folder held when the run started. It
// never overwrites or deletes a file that changed in the folder since then,
// nor creates over one that appeared: each such change is refused and
// named. It works by descriptor beneath dir and follows no link.
//
// A new or modified file is written beside its name and renamed into place
// (a crash leaves the old file whole; a modified file is exchanged with
// its replacement and checked once more, see replaceChecked); a modified file keeps its owner and
// permission bits (setuid, setgid and sticky dropped), a new one gets 0644
// or 0755 and, when root applies, the owner of its directory. A file's
// other hard links keep the old contents; extended attributes are not
// carried over.
func Apply(dir, src string, base map[string]FolderFile, changes []Change) (applied []Change, refused []Skipped, err error) {
	folder, err := sandbox.OpenWorkspace(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("folder %s: %w", dir, err)
	}
	defer folder.Close()
	from, err := sandbox.OpenWorkspace(src)
	if err != nil {
		return nil, nil, fmt.Errorf("changes %s: %w", src, err)
	}
	defer from.Close()
	for _, c := range changes {
		if err := validRel(c.Path); err != nil || isGit(c.Path) {
			refused = append(refused, Skipped{c.Path, "not a path a run may change"})
			continue
		}
		reason, err := applyOne(folder, from, c, base)
		switch {
		case err != nil:
			refused = append(refused, Skipped{c.Path, err.Error()})
		case reason != "":
			refused = append(refused, Skipped{c.Path, reason})
		default:
			applied = append(applied, c)
		}
	}
	return applied, refused, nil
}

// applyOne makes one change; a non-empty reason is a refusal.
func applyOne(folder, from *os.File, c Change, base map[string]FolderFile) (string, error) {
	name := path.Base(c.Path)
	pfd, err := openParent(folder, dirOf(c.Path), c.Kind == ChangeAdded)
	if err != nil {
		return "", err
	}
	defer unix.Close(pfd)
	var st unix.Stat_t
	statErr := unix.Fstatat(pfd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	was, had := base[c.Path]
	switch c.Kind {
	case ChangeAdded:
		if statErr == nil {
			return "it is in the folder now and was not when the run started: not replaced", nil
		}
		if !errors.Is(statErr, unix.ENOENT) {
			return "", statErr
		}
	case ChangeModified, ChangeDeleted:
		if !had {
			return "", fmt.Errorf("no record of it in the folder when the run started")
		}
		if statErr != nil || !was.same(&st) {
			return "it changed in the folder since the run started: not replaced", nil
		}
	default:
		return "", fmt.Errorf("unknown change %q", c.Kind)
	}
	if c.Kind == ChangeDeleted {
		return "", unix.Unlinkat(pfd, name, 0)
	}
	in, fi, err := openRegular(from, c.Path)
	if err != nil {
		return "", err
	}
	defer in.Close()
	mode := uint32(0o644)
	if fi.Mode()&0o111 != 0 {
		mode = 0o755
	}
	uid, gid := -1, -1
	if c.Kind == ChangeModified {
		mode, uid, gid = st.Mode&0o777, int(st.Uid), int(st.Gid)
	} else {
		var pst unix.Stat_t
		if err := unix.Fstat(pfd, &pst); err != nil {
			return "", err
		}
		uid, gid = int(pst.Uid), int(pst.Gid)
	}
	tmp, err := writeBeside(pfd, in, mode, uid, gid)
	if err != nil {
		return "", err
	}
	if c.Kind == ChangeAdded {
		err = unix.Renameat2(pfd, tmp, pfd, name, unix.RENAME_NOREPLACE)
		if errors.Is(err, unix.EEXIST) {
			unix.Unlinkat(pfd, tmp, 0)
			return "it appeared in the folder while the changes were applied: not replaced", nil
		}
	} else {
		return replaceChecked(pfd, tmp, name, was)
	}
	if err != nil {
		unix.Unlinkat(pfd, tmp, 0)
		return "", err
	}
	return "", nil
}

// replaceChecked puts the new file tmp in place of name, in the directory
// pfd, if name is still the file was describes. The two are exchanged
// (RENAME_EXCHANGE), so that the name always holds a whole file, and the
// file that comes out is checked: one saved over name since the run
// started, even a moment ago, is put back, and the change refused. The
// exchange also spares ext4 the flush it makes on a rename over an
// existing file (auto_da_alloc), which made applying three times slower.
func replaceChecked(pfd int, tmp, name string, was FolderFile) (string, error) {
	const changed = "it changed in the folder since the run started: not replaced"
	var st unix.Stat_t
	if err := unix.Fstatat(pfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil || !was.same(&st) {
		unix.Unlinkat(pfd, tmp, 0)
		return changed, nil
	}
	if beforeExchange != nil {
		beforeExchange(pfd, name)
	}
	err := unix.Renameat2(pfd, tmp, pfd, name, unix.RENAME_EXCHANGE)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EOPNOTSUPP) {
		// A file system without exchange (NFS, some FUSE): renamed over,
		// checked just before.
		err = unix.Renameat(pfd, tmp, pfd, name)
		if err == nil {
			return "", nil
		}
	}
	if err != nil {
		unix.Unlinkat(pfd, tmp, 0)
		return "", err
	}
	// The rename itself moved the change time; the rest must be as before.
	out := was
	out.CTime = 0
	if err := unix.Fstatat(pfd, tmp, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil || !out.same(&unix.Stat_t{
		Mode: st.Mode, Size: st.Size, Ino: st.Ino, Dev: st.Dev, Mtim: st.Mtim}) {
		// Saved over in the meantime: the user's file goes back.
		if unix.Renameat2(pfd, tmp, pfd, name, unix.RENAME_EXCHANGE) == nil {
			unix.Unlinkat(pfd, tmp, 0)
		}
		return changed, nil
	}
	return "", unix.Unlinkat(pfd, tmp, 0)
}

// beforeExchange, when set by a test, runs between replaceChecked's check
// and its exchange: where a user's save would be raced.
var beforeExchange func(pfd int, name string)

// openParent opens the directory rel beneath folder ("" is folder itself),
// making missing directories when create is set, each owned, when root
// applies, as its parent.
func openParent(folder *os.File, rel string, create bool) (int, error) {
	fd, err := nofollow.Open(int(folder.Fd()), rel, nofollow.How{Flags: unix.O_RDONLY | unix.O_DIRECTORY})
	if err == nil || !create || !errors.Is(err, unix.ENOENT) {
		return fd, err
	}
	fd, err = unix.Dup(int(folder.Fd()))
	if err != nil {
		return -1, err
	}
	for _, part := range strings.Split(rel, "/") {
		mkErr := unix.Mkdirat(fd, part, 0o755)
		next, err := unix.Openat(fd, part, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err == nil && mkErr == nil && os.Geteuid() == 0 {
			var pst unix.Stat_t
			if unix.Fstat(fd, &pst) == nil {
				_ = unix.Fchown(next, int(pst.Uid), int(pst.Gid))
			}
		}
		unix.Close(fd)
		if err != nil {
			return -1, err
		}
		fd = next
	}
	return fd, nil
}

// writeBeside writes in to a new file of a fresh name in the directory
// pfd, with mode and, when root writes, the owner uid:gid, and returns
// its name.
func writeBeside(pfd int, in io.Reader, mode uint32, uid, gid int) (string, error) {
	var b [6]byte
	var name string
	var fd int
	for range 10 {
		rand.Read(b[:])
		name = ".codeagent-apply-" + hex.EncodeToString(b[:])
		var err error
		fd, err = unix.Openat(pfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EEXIST) {
			return "", err
		}
		fd = -1
	}
	if fd < 0 {
		return "", fmt.Errorf("no free temporary name")
	}
	out := os.NewFile(uintptr(fd), name)
	_, err := io.Copy(out, in)
	if err == nil && os.Geteuid() == 0 && uid >= 0 {
		err = out.Chown(uid, gid)
	}
	if err == nil {
		err = unix.Fchmod(fd, mode)
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		unix.Unlinkat(pfd, name, 0)
		return "", err
	}
	return name, nil
}

// maxDiffFile bounds a file Diff shows as text.
const maxDiffFile = 1 << 20

// Diff is a unified diff of the text files among changes, between the
// folder dir and the directory src with the new contents; a binary or
// large file gets one line saying it differs.
func Diff(dir, src string, changes []Change) (string, error) {
	folder, err := sandbox.OpenWorkspace(dir)
	if err != nil {
		return "", fmt.Errorf("folder %s: %w", dir, err)
	}
	defer folder.Close()
	from, err := sandbox.OpenWorkspace(src)
	if err != nil {
		return "", fmt.Errorf("changes %s: %w", src, err)
	}
	defer from.Close()
	var b strings.Builder
	for _, c := range changes {
		oldLabel, newLabel := "a/"+c.Path, "b/"+c.Path
		var old, cur string
		var okOld, okNew = true, true
		if c.Kind != ChangeAdded {
			old, okOld = readText(folder, c.Path)
		} else {
			oldLabel = "/dev/null"
		}
		if c.Kind != ChangeDeleted {
			cur, okNew = readText(from, c.Path)
		} else {
			newLabel = "/dev/null"
		}
		if !okOld || !okNew {
			fmt.Fprintf(&b, "Binary files %s and %s differ\n", oldLabel, newLabel)
			continue
		}
		b.WriteString(udiff.Unified(oldLabel, newLabel, old, cur))
	}
	return b.String(), nil
}

// readText reads rel beneath d as text: false for a file that is large,
// not UTF-8 or holds NUL bytes.
func readText(d *os.File, rel string) (string, bool) {
	f, fi, err := openRegular(d, rel)
	if err != nil {
		return "", false
	}
	defer f.Close()
	if fi.Size() > maxDiffFile {
		return "", false
	}
	data, err := io.ReadAll(io.LimitReader(f, maxDiffFile+1))
	if err != nil || len(data) > maxDiffFile || !utf8.Valid(data) || strings.ContainsRune(string(data), 0) {
		return "", false
	}
	return string(data), true
}
