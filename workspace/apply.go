package workspace

import (
	"errors"
	"fmt"
	"os"
	"path"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/codeagent/codeagent/internal/nofollow"
	"github.com/codeagent/codeagent/sandbox"
)

// ApplyOptions are what the person decided beyond the changes themselves.
type ApplyOptions struct {
	// Sensitive are the paths (or directories) named with
	// --apply-sensitive: a change there that Sensitive would refuse is
	// applied, unless it is below .git, which nothing applies.
	Sensitive []string
	// Force are the paths named with --force: a conflict there (the
	// folder's file changed since the run started, or appeared) is
	// overridden, and the folder's file replaced or deleted. A refused
	// name, a link or a special file is not overridden.
	Force []string
}

// ApplyResult is what Apply did.
type ApplyResult struct {
	// Applied are the changes written by this apply.
	Applied []Change `json:"applied"`
	// Already are the changes found applied (by an earlier apply that was
	// interrupted, or when applying again): neither written nor conflicts.
	Already []Change `json:"already,omitempty"`
	// Refused are the changes the check refused, each with the reason:
	// then nothing was written. Or, when Stopped, the one change whose
	// writing failed.
	Refused []Skipped `json:"refused,omitempty"`
	// Stopped says that writing failed after the check passed: the changes
	// before the failed one are applied, the rest not; applying the same
	// changes again finishes the work.
	Stopped bool `json:"stopped,omitempty"`
}

// Complete reports whether every change is in the folder now.
func (r *ApplyResult) Complete() bool { return len(r.Refused) == 0 && !r.Stopped }

// Apply brings changes (see FolderChanges) to the folder dir from the
// directory src that holds the new contents (the run's workspace, or kept
// changes), where base is what the folder held when the run started.
//
// It is all or none: every change is checked first, and when one is
// refused nothing is written and each refusal is returned. A change is
// refused when its name is sensitive (see Sensitive; opt.Sensitive lets
// through what the person named, never .git), when the folder's file
// changed since the run started or one appeared under a new file's name
// (opt.Force overrides that), when a link, a special file or a file stands
// where the path goes, and when the folder's file system lacks the space.
// A change found already made (an interrupted apply run again) is skipped,
// not refused.
//
// Each file is written beside its name and renamed into place, so that a
// crash leaves it old or new, never torn (temporary files an apply killed
// on the way left are removed by the next one): a modified file is
// exchanged with its replacement and checked once more (replaceChecked),
// and keeps its owner and permission bits (setuid, setgid and sticky
// dropped); a new one gets 0644 or 0755 and, when root applies, the owner
// of its directory. A file's other hard links keep the old contents;
// extended attributes are not carried over. It works by descriptor beneath
// dir and follows no link.
func Apply(dir, src string, base map[string]FolderFile, changes []Change, opt ApplyOptions) (*ApplyResult, error) {
	folder, err := sandbox.OpenWorkspace(dir)
	if err != nil {
		return nil, fmt.Errorf("folder %s: %w", dir, err)
	}
	defer folder.Close()
	from, err := sandbox.OpenWorkspace(src)
	if err != nil {
		return nil, fmt.Errorf("changes %s: %w", src, err)
	}
	defer from.Close()
	a := &applier{folder: newDirCache(folder), from: newDirCache(from), base: base, opt: opt}
	defer a.folder.close()
	defer a.from.close()
	sorted := append([]Change(nil), changes...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Path < sorted[j].Path })
	res := &ApplyResult{Applied: []Change{}}
	var todo []plan
	var need, files int64
	for _, c := range sorted {
		p, reason := a.check(c)
		switch {
		case reason != "":
			res.Refused = append(res.Refused, Skipped{c.Path, reason})
		case p.already:
			res.Already = append(res.Already, c)
		default:
			todo = append(todo, p)
			if c.Kind != ChangeDeleted {
				need, files = need+p.size, files+1
			}
		}
	}
	if reason := a.space(need, files); reason != "" {
		res.Refused = append(res.Refused, Skipped{".", reason})
	}
	if len(res.Refused) > 0 {
		return res, nil
	}
	a.sweep(sorted)
	for _, p := range todo {
		if reason := a.write(p); reason != "" {
			res.Refused, res.Stopped = []Skipped{{p.c.Path, reason}}, true
			return res, nil
		}
		res.Applied = append(res.Applied, p.c)
	}
	return res, nil
}

// applier is one Apply: the folder and the new contents, each with its
// directories opened once.
type applier struct {
	folder, from *dirCache
	base         map[string]FolderFile
	opt          ApplyOptions
}

// plan is one change that passed the check.
type plan struct {
	c       Change
	was     FolderFile // the folder's file when the run started
	force   bool       // a conflict overridden
	size    int64      // the new contents' size
	already bool       // the folder holds the change already
}

// The reasons of conflicts.
const (
	reasonChanged  = "it changed in the folder since the run started: not replaced (--force PATH replaces it)"
	reasonAppeared = "it is in the folder now and was not when the run started: not replaced (--force PATH replaces it)"
)

// check decides what to do with c, or why not to.
func (a *applier) check(c Change) (plan, string) {
	p := plan{c: c, force: allowedBy(a.opt.Force, c.Path)}
	if err := validRel(c.Path); err != nil {
		return p, "not a path a run may change"
	}
	if why, never := Sensitive(c.Path); never {
		return p, why
	} else if why != "" && !allowedBy(a.opt.Sensitive, c.Path) {
		return p, "refused: " + why + " (--apply-sensitive " + c.Path + " applies it)"
	}
	was, had := a.base[c.Path]
	p.was = was
	switch c.Kind {
	case ChangeAdded:
	case ChangeModified, ChangeDeleted:
		if !had {
			return p, "no record of it in the folder when the run started"
		}
	default:
		return p, fmt.Sprintf("unknown change %q", c.Kind)
	}
	if c.Kind != ChangeDeleted {
		var st unix.Stat_t
		if err := a.from.stat(c.Path, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
			return p, "its new contents are not a regular file of the change set"
		}
		p.size = st.Size
	}
	var st unix.Stat_t
	err := a.folder.stat(c.Path, &st)
	switch {
	case errors.Is(err, unix.ENOENT):
		switch {
		case c.Kind == ChangeDeleted:
			p.already = true
		case c.Kind == ChangeModified && !p.force:
			return p, reasonChanged
		}
		return p, ""
	case errors.Is(err, unix.ELOOP):
		return p, "a symbolic link is on its way in the folder: not followed"
	case errors.Is(err, unix.ENOTDIR):
		return p, "a file of the folder stands where one of its directories would be"
	case err != nil:
		return p, err.Error()
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return p, "the folder has no regular file there (a link, a directory or a special file): not replaced"
	case c.Kind != ChangeAdded && was.same(&st):
		return p, ""
	}
	if c.Kind != ChangeDeleted && a.sameContents(c.Path, st.Size, p.size) {
		p.already = true
		return p, ""
	}
	if p.force {
		return p, ""
	}
	if c.Kind == ChangeAdded {
		return p, reasonAppeared
	}
	return p, reasonChanged
}

// sameContents reports whether the folder's file at rel, of size have,
// holds the new contents, of size want, already.
func (a *applier) sameContents(rel string, have, want int64) bool {
	same, err := sameContents(a.folder.root, a.from.root, rel, have, want)
	return err == nil && same
}

// space says when the folder's file system cannot take bytes more in
// files new files, "" when it can.
func (a *applier) space(bytes, files int64) string {
	var fs unix.Statfs_t
	if bytes == 0 || unix.Fstatfs(int(a.folder.root.Fd()), &fs) != nil {
		return ""
	}
	free, inodes := fs.Bavail*uint64(fs.Bsize), fs.Ffree
	if os.Geteuid() == 0 {
		free = fs.Bfree * uint64(fs.Bsize)
	}
	switch {
	case uint64(bytes) > free:
		return fmt.Sprintf("not enough space: the changes need %s and the folder's file system has %s free", sandbox.FormatSize(bytes), sandbox.FormatSize(int64(free)))
	case fs.Files > 0 && uint64(files) > inodes:
		return fmt.Sprintf("not enough space: the changes need %d files and the folder's file system has room for %d more", files, inodes)
	}
	return ""
}

// write makes one change; a non-empty reason says why it was not made.
func (a *applier) write(p plan) string {
	c := p.c
	name := path.Base(c.Path)
	pfd, err := a.folder.open(dirOf(c.Path), c.Kind != ChangeDeleted)
	if err != nil {
		return err.Error()
	}
	var st unix.Stat_t
	statErr := unix.Fstatat(pfd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	exists := statErr == nil
	if statErr != nil && !errors.Is(statErr, unix.ENOENT) {
		return statErr.Error()
	}
	if exists && st.Mode&unix.S_IFMT != unix.S_IFREG {
		return "the folder has no regular file there (a link, a directory or a special file): not replaced"
	}
	if c.Kind == ChangeDeleted {
		if exists && !p.force && !p.was.same(&st) {
			return reasonChanged
		}
		if err := unix.Unlinkat(pfd, name, 0); err != nil && !errors.Is(err, unix.ENOENT) {
			return err.Error()
		}
		return ""
	}
	in, err := a.from.openFile(c.Path)
	if err != nil {
		return "its new contents: " + err.Error()
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err.Error()
	}
	mode, uid, gid := uint32(0o644), -1, -1
	if fi.Mode()&0o111 != 0 {
		mode = 0o755
	}
	if exists {
		mode, uid, gid = st.Mode&0o777, int(st.Uid), int(st.Gid)
	} else {
		var pst unix.Stat_t
		if err := unix.Fstat(pfd, &pst); err != nil {
			return err.Error()
		}
		uid, gid = int(pst.Uid), int(pst.Gid)
	}
	tmp, err := writeBeside(pfd, in, mode, uid, gid)
	if err != nil {
		return err.Error()
	}
	switch {
	case exists && !p.force:
		if c.Kind == ChangeAdded {
			unix.Unlinkat(pfd, tmp, 0)
			return "it appeared in the folder while the changes were applied: not replaced"
		}
		reason, err := replaceChecked(pfd, tmp, name, p.was)
		if err != nil {
			return err.Error()
		}
		return reason
	case exists:
		err = unix.Renameat(pfd, tmp, pfd, name) // forced: over whatever is there now
	default:
		err = unix.Renameat2(pfd, tmp, pfd, name, unix.RENAME_NOREPLACE)
		if errors.Is(err, unix.EEXIST) && !p.force {
			unix.Unlinkat(pfd, tmp, 0)
			return "it appeared in the folder while the changes were applied: not replaced"
		} else if errors.Is(err, unix.EEXIST) {
			err = unix.Renameat(pfd, tmp, pfd, name)
		}
	}
	if err != nil {
		unix.Unlinkat(pfd, tmp, 0)
		return err.Error()
	}
	return ""
}

// replaceChecked puts the new file tmp in place of name, in the directory
// pfd, if name is still the file was describes. The two are exchanged
// (RENAME_EXCHANGE), so that the name always holds a whole file, and the
// file that comes out is checked: one saved over name since the run
// started, even a moment ago, is put back, and the change refused. The
// exchange also spares ext4 the flush it makes on a rename over an
// existing file (auto_da_alloc), which made applying three times slower.
func replaceChecked(pfd int, tmp, name string, was FolderFile) (string, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(pfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil || !was.same(&st) {
		unix.Unlinkat(pfd, tmp, 0)
		return reasonChanged, nil
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
		return reasonChanged, nil
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
