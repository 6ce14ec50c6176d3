package docker

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/codeagent/codeagent/sandbox/internal/sparse"
)

// maxEntries bounds the entries a program may leave in its workspace.
const maxEntries = 100_000

// stamp identifies the state of a staged entry: a change of content, mode
// or kind changes the inode's ctime, which a program cannot set.
type stamp struct {
	mode  fs.FileMode
	ino   uint64
	ctime int64 // ns; -1 where unknown
	size  int64
}

// snapshot is what stageIn copied, by slash-separated relative path.
type snapshot struct {
	entries map[string]stamp
	size    int64   // bytes of the regular files
	budget  *budget // bounds the copy back; nil: unbounded
	// perms are the workspace's permission bits by inode of the staged
	// copy, when the copies were opened up for a program of another uid.
	perms map[uint64]fs.FileMode
}

// stageIn copies the workspace tree ws into the empty staging directory dst
// (regular files, directories and symbolic links; other kinds are left
// out; permission bits only). With uid >= 0 (codeagent is root) the copies
// are given to uid; with -1 they stay codeagent's and are opened up for the
// program's uid instead (files rw, directories rwx for all, the original
// bits kept in the snapshot): the directory above is private to codeagent.
func stageIn(ws, dst string, uid int) (snapshot, error) {
	snap := snapshot{entries: map[string]stamp{}}
	if uid < 0 {
		snap.perms = map[uint64]fs.FileMode{}
	}
	// Through a Root and with O_NOFOLLOW: a link planted in the workspace
	// (by a program of a concurrent run) is copied as a link, never followed
	// to a host file.
	wr, err := os.OpenRoot(ws)
	if err != nil {
		return snap, fmt.Errorf("open workspace: %w", err)
	}
	defer wr.Close()
	err = fs.WalkDir(wr.FS(), ".", func(rel string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if rel == "." {
			return nil
		}
		target := filepath.Join(dst, filepath.FromSlash(rel))
		fi, err := wr.Lstat(rel)
		if err != nil {
			return err
		}
		switch {
		case fi.IsDir():
			err = os.Mkdir(target, fi.Mode().Perm())
		case fi.Mode().IsRegular():
			err = copyFileFrom(wr, rel, target, fi.Mode().Perm())
			snap.size += fi.Size()
		case fi.Mode()&fs.ModeSymlink != 0:
			var link string
			if link, err = wr.Readlink(rel); err == nil {
				err = os.Symlink(link, target)
			}
		default:
			return nil
		}
		perm := fi.Mode().Perm()
		if err == nil && uid >= 0 {
			err = os.Lchown(target, uid, uid)
		}
		if err == nil && fi.Mode()&fs.ModeSymlink == 0 {
			err = os.Chmod(target, opened(perm, fi.IsDir(), uid < 0))
		}
		if err != nil {
			return err
		}
		st, err := os.Lstat(target)
		if err != nil {
			return err
		}
		s := stampOf(st)
		snap.entries[rel] = s
		if snap.perms != nil {
			snap.perms[s.ino] = perm
		}
		return nil
	})
	if err != nil {
		return snap, fmt.Errorf("copy workspace: %w", err)
	}
	return snap, nil
}

// copyFileFrom copies regular file rel of r to dst, not following a link.
func copyFileFrom(r *os.Root, rel, dst string, perm fs.FileMode) error {
	in, err := r.OpenFile(rel, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return err
	}
	defer in.Close()
	if fi, err := in.Stat(); err != nil || !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is no longer a regular file", rel)
	}
	return copyOpened(in, dst, perm)
}

// opened is perm, or with open set, perm with read and write for all and,
// for directories, search too.
func opened(perm fs.FileMode, dir, open bool) fs.FileMode {
	switch {
	case !open:
		return perm
	case dir:
		return perm | 0o777
	}
	return perm | 0o666
}

// copyOpened copies the open file in to a new file dst.
func copyOpened(in *os.File, dst string, perm fs.FileMode) error {
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if err := sparse.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// stageOut brings ws up to date with the staging directory src after the
// program ended: new and changed entries are copied, entries that the
// program removed are removed. Both trees are accessed through os.Root, so
// that no symbolic link the program made is followed out of either. Only
// the permission bits (0777) of files and directories are copied: never
// setuid, setgid or sticky bits, owners, extended attributes or file
// capabilities. modes, when not nil, are the bits the program gave its
// entries before handBack opened them up for codeagent.
func stageOut(src, ws string, snap snapshot, modes map[string]fs.FileMode) error {
	sr, err := os.OpenRoot(src)
	if err != nil {
		return fmt.Errorf("open staging directory: %w", err)
	}
	defer sr.Close()
	wr, err := os.OpenRoot(ws)
	if err != nil {
		return fmt.Errorf("open workspace: %w", err)
	}
	defer wr.Close()
	seen := map[string]bool{}
	var dirs []dirMode
	err = fs.WalkDir(sr.FS(), ".", func(rel string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if rel == "." {
			return nil
		}
		if len(seen) >= maxEntries {
			return fmt.Errorf("more than %d entries", maxEntries)
		}
		seen[rel] = true
		fi, err := sr.Lstat(rel)
		if err != nil {
			return err
		}
		old, had := snap.entries[rel]
		if had && old == stampOf(fi) && old.ctime >= 0 && !fi.IsDir() {
			return nil
		}
		if !snap.budget.admit(wr, rel, fi) {
			if fi.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		return syncEntry(sr, wr, rel, fi, snap.perm(rel, fi, modes), had && old.mode == fi.Mode(), &dirs)
	})
	if err != nil {
		return fmt.Errorf("copy workspace back: %w", err)
	}
	var gone []string
	for rel := range snap.entries {
		if !seen[rel] {
			gone = append(gone, rel)
		}
	}
	sort.Strings(gone)
	var last string
	for _, rel := range gone {
		if last != "" && strings.HasPrefix(rel, last+"/") {
			continue // inside a directory already removed
		}
		// ENOTDIR: a directory above was replaced by a file, which took
		// the entry with it.
		if err := wr.RemoveAll(rel); err != nil && !errors.Is(err, syscall.ENOTDIR) {
			return fmt.Errorf("remove %s from the workspace: %w", rel, err)
		}
		last = rel
	}
	// Directories get their bits last, deepest first, so that one without
	// write or search permission did not stop its entries being copied.
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := wr.Chmod(dirs[i].rel, dirs[i].perm); err != nil {
			return fmt.Errorf("copy workspace back: %w", err)
		}
	}
	return nil
}

// dirMode is a directory's final permission bits.
type dirMode struct {
	rel  string
	perm fs.FileMode
}

// perm is the permission bits for the workspace's copy of the staged entry
// rel: its own, unless the staging was opened up for another uid; then the
// bits the program set (modes) or, for a staged file, the original ones.
func (s snapshot) perm(rel string, fi fs.FileInfo, modes map[string]fs.FileMode) fs.FileMode {
	if m, ok := modes[rel]; ok {
		return m.Perm()
	}
	if s.perms != nil {
		if m, ok := s.perms[stampOf(fi).ino]; ok {
			return m
		}
		return fi.Mode().Perm() &^ 0o022
	}
	return fi.Mode().Perm()
}

// syncEntry makes ws's entry rel like the staged one described by fi, with
// permission bits perm. A directory is left open to its owner, and its bits
// are appended to dirs to be set at the end.
func syncEntry(sr, wr *os.Root, rel string, fi fs.FileInfo, perm fs.FileMode, sameMode bool, dirs *[]dirMode) error {
	cur, err := wr.Lstat(rel)
	exists := err == nil
	kindDiffers := exists && cur.Mode().Type() != fi.Mode().Type()
	if kindDiffers || (exists && fi.Mode()&fs.ModeSymlink != 0) {
		if err := wr.RemoveAll(rel); err != nil {
			return err
		}
		exists = false
	}
	perm = perm.Perm()
	switch {
	case fi.IsDir():
		switch {
		case !exists:
			if err := wr.Mkdir(rel, 0o700); err != nil {
				return err
			}
		case cur.Mode().Perm()&0o700 != 0o700:
			if err := wr.Chmod(rel, cur.Mode().Perm()|0o700); err != nil {
				return err
			}
			if sameMode {
				perm = cur.Mode().Perm()
			}
		case sameMode:
			return nil
		}
		*dirs = append(*dirs, dirMode{rel, perm})
		return nil
	case fi.Mode().IsRegular():
		in, err := sr.Open(rel)
		if err != nil {
			return err
		}
		defer in.Close()
		if exists && cur.Mode().Perm()&0o200 == 0 {
			if err := wr.Chmod(rel, cur.Mode().Perm()|0o200); err != nil {
				return err
			}
		}
		out, err := wr.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
		if err != nil {
			return err
		}
		if err := sparse.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		if err := out.Close(); err != nil {
			return err
		}
		return wr.Chmod(rel, perm)
	case fi.Mode()&fs.ModeSymlink != 0:
		link, err := sr.Readlink(rel)
		if err != nil {
			return err
		}
		return wr.Symlink(link, rel)
	}
	return nil // devices, fifos, sockets stay behind
}

// removeTree removes dir even where a program left directories without
// write or search permission.
func removeTree(dir string) error {
	unmountBelow(dir)
	err := os.RemoveAll(dir)
	if err == nil || errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if d != nil && d.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	return os.RemoveAll(dir)
}
