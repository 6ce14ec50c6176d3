package docker

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/codeagent/codeagent/internal/sparse"
	"github.com/codeagent/codeagent/sandbox/internal/wsperm"
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
// (regular files, directories and symbolic links; other kinds, and
// entries of other file systems mounted below ws, are left out;
// permission bits only). With uid >= 0 (codeagent is root) the copies
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
	_, root, err := wsperm.RootOf(wr)
	if err != nil {
		return snap, fmt.Errorf("stat workspace: %w", err)
	}
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
		if st, ok := wsperm.StatOf(fi); ok && st.Dev != root.Dev {
			// A file system mounted below the workspace is not the
			// program's to read or change.
			if fi.IsDir() {
				return fs.SkipDir
			}
			return nil
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
