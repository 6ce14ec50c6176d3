package docker

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
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
}

// stageIn copies the workspace tree ws into the empty staging directory dst
// (regular files, directories and symbolic links; other kinds are left
// out) and gives the copies to uid chown when it is not -1.
func stageIn(ws, dst string, chown int) (snapshot, error) {
	snap := snapshot{entries: map[string]stamp{}}
	err := filepath.WalkDir(ws, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(ws, p)
		if err != nil || rel == "." {
			return err
		}
		target := filepath.Join(dst, rel)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case fi.IsDir():
			err = os.Mkdir(target, fi.Mode().Perm())
		case fi.Mode().IsRegular():
			err = copyFile(p, target, fi.Mode().Perm())
			snap.size += fi.Size()
		case fi.Mode()&fs.ModeSymlink != 0:
			var link string
			if link, err = os.Readlink(p); err == nil {
				err = os.Symlink(link, target)
			}
		default:
			return nil
		}
		if err == nil && chown >= 0 {
			err = os.Lchown(target, chown, chown)
		}
		if err == nil && fi.Mode()&fs.ModeSymlink == 0 {
			err = os.Chmod(target, fi.Mode().Perm())
		}
		if err != nil {
			return err
		}
		st, err := os.Lstat(target)
		if err != nil {
			return err
		}
		snap.entries[filepath.ToSlash(rel)] = stampOf(st)
		return nil
	})
	if err != nil {
		return snap, fmt.Errorf("copy workspace: %w", err)
	}
	return snap, nil
}

func copyFile(src, dst string, perm fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if err := copyContent(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// stageOut brings ws up to date with the staging directory src after the
// program ended: new and changed entries are copied, entries that the
// program removed are removed. Both trees are accessed through os.Root, so
// that no symbolic link the program made is followed out of either.
func stageOut(src, ws string, snap snapshot) error {
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
		return syncEntry(sr, wr, rel, fi, had && old.mode == fi.Mode())
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
		if err := wr.RemoveAll(rel); err != nil {
			return fmt.Errorf("remove %s from the workspace: %w", rel, err)
		}
		last = rel
	}
	return nil
}

// syncEntry makes ws's entry rel like the staged one described by fi.
func syncEntry(sr, wr *os.Root, rel string, fi fs.FileInfo, sameMode bool) error {
	cur, err := wr.Lstat(rel)
	exists := err == nil
	kindDiffers := exists && cur.Mode().Type() != fi.Mode().Type()
	if kindDiffers || (exists && fi.Mode()&fs.ModeSymlink != 0) {
		if err := wr.RemoveAll(rel); err != nil {
			return err
		}
		exists = false
	}
	perm := fi.Mode().Perm()
	switch {
	case fi.IsDir():
		if !exists {
			return wr.Mkdir(rel, perm)
		}
		if !sameMode {
			return wr.Chmod(rel, perm)
		}
		return nil
	case fi.Mode().IsRegular():
		in, err := sr.Open(rel)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := wr.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
		if err != nil {
			return err
		}
		if err := copyContent(out, in); err != nil {
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
