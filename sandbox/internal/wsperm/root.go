package wsperm

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"syscall"
)

// Helpers for the copy backs that reach the workspace through an os.Root
// (the Docker and Kubernetes backends).

// Stat is what the rule needs of an entry: owner, group, mode bits
// (0o7777) and the device of its file system.
type Stat struct {
	UID, GID int
	Mode     uint32
	Dev      uint64
}

// StatOf returns fi's Stat; ok is false where the platform gives none.
func StatOf(fi fs.FileInfo) (s Stat, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return Stat{Mode: uint32(fi.Mode().Perm())}, false
	}
	return Stat{UID: int(st.Uid), GID: int(st.Gid), Mode: uint32(st.Mode) & 0o7777, Dev: uint64(st.Dev)}, true
}

// RootOf describes the workspace opened as r.
func RootOf(r *os.Root) (Root, Stat, error) {
	fi, err := r.Lstat(".")
	if err != nil {
		return Root{}, Stat{}, err
	}
	s, _ := StatOf(fi)
	return Root{UID: s.UID, GID: s.GID, Mode: s.Mode}, s, nil
}

// FileMode converts mode bits (0o7777) to an fs.FileMode, for Chmod.
func FileMode(m uint32) fs.FileMode {
	fm := fs.FileMode(m & 0o777)
	if m&setuid != 0 {
		fm |= fs.ModeSetuid
	}
	if m&setgid != 0 {
		fm |= fs.ModeSetgid
	}
	if m&sticky != 0 {
		fm |= fs.ModeSticky
	}
	return fm
}

// Foreign reports whether the entry rel of r, or the directory it is in,
// lies on another file system than dev (a mount below the workspace):
// a copy back must neither read nor write there.
func Foreign(r *os.Root, rel string, dev uint64) bool {
	for _, p := range []string{rel, path.Dir(rel)} {
		if fi, err := r.Lstat(p); err == nil {
			if s, ok := StatOf(fi); ok && s.Dev != dev {
				return true
			}
		}
	}
	return false
}

// RemoveAll removes rel from r with what is below it, without following
// links and without entering another file system than dev: a mount below
// rel stays, with the directories above it. gone reports whether rel is
// no longer there.
func RemoveAll(r *os.Root, rel string, dev uint64) (gone bool, err error) {
	fi, err := r.Lstat(rel)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	if s, ok := StatOf(fi); ok && s.Dev != dev {
		return false, nil
	}
	if !fi.IsDir() {
		return true, r.Remove(rel)
	}
	d, err := r.Open(rel)
	if err != nil {
		return false, err
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return false, err
	}
	whole := true
	for _, n := range names {
		g, err := RemoveAll(r, rel+"/"+n, dev)
		if err != nil {
			return false, err
		}
		whole = whole && g
	}
	if !whole {
		return false, nil
	}
	return true, r.Remove(rel)
}

// Dir is a directory's final mode and group, which decide those of the
// new entries made in it.
type Dir struct {
	Mode uint32
	GID  int
}

// Dirs remembers, for a copy back that sets directories' modes last, the
// final mode and group of the directories it made or changed.
type Dirs struct {
	root Root
	dirs map[string]Dir
}

// NewDirs starts with the workspace directory, root.
func NewDirs(root Root) *Dirs {
	return &Dirs{root: root, dirs: map[string]Dir{".": {root.Mode, root.GID}}}
}

// Note records the final mode and group of directory rel.
func (d *Dirs) Note(rel string, mode uint32, gid int) { d.dirs[rel] = Dir{mode, gid} }

// Parent is the final mode and group of the directory rel is in: as noted,
// else as r has it, else the workspace directory's.
func (d *Dirs) Parent(r *os.Root, rel string) Dir {
	dir := path.Dir(rel)
	if p, ok := d.dirs[dir]; ok {
		return p
	}
	if fi, err := r.Lstat(dir); err == nil {
		st, _ := StatOf(fi)
		return Dir{st.Mode, st.GID}
	}
	return Dir{d.root.Mode, d.root.GID}
}
