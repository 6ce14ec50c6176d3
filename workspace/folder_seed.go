package workspace

import (
	"fmt"
	"io"
	"os"
	"sort"
	"time"

	"golang.org/x/sys/unix"

	"github.com/codeagent/codeagent/internal/sparse"
	"github.com/codeagent/codeagent/sandbox"
)

// Seed copies the folder's directories and files into the workspace w,
// which must not hold any of them yet. Modes keep only the permission
// bits a file of a workspace may have (0755 or 0644); times are kept, so
// that tools that look at them (make) see the folder's.
func (f *Folder) Seed(w *Workspace) error { return f.SeedWith(w, nil) }

// SeedProgress is how far a Seed has come.
type SeedProgress struct {
	Files, TotalFiles int
	Bytes, TotalBytes int64
}

// SeedWith is Seed, calling progress (when set) after each file copied.
func (f *Folder) SeedWith(w *Workspace, progress func(SeedProgress)) error {
	src, err := sandbox.OpenWorkspace(f.Dir)
	if err != nil {
		return fmt.Errorf("folder: %w", err)
	}
	defer src.Close()
	dst, err := sandbox.OpenWorkspace(w.Dir)
	if err != nil {
		return fmt.Errorf("workspace: %w", err)
	}
	defer dst.Close()
	for _, rel := range f.Dirs {
		dfd, err := mkdirAt(dst, rel, 0o755)
		if err != nil {
			return fmt.Errorf("workspace: %w", err)
		}
		dfd.Close()
	}
	f.seeded = make(map[string]seedID, len(f.Files))
	p := SeedProgress{TotalFiles: len(f.Files), TotalBytes: f.Bytes}
	for _, rel := range f.paths() {
		id, err := seedOne(src, dst, rel, f.Files[rel])
		if err != nil {
			return fmt.Errorf("copy %s from the folder: %w", rel, err)
		}
		f.seeded[rel] = id
		if progress != nil {
			p.Files++
			p.Bytes += f.Files[rel].Size
			progress(p)
		}
	}
	return nil
}

func (f *Folder) paths() []string {
	paths := make([]string, 0, len(f.Files))
	for p := range f.Files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	return paths
}

// seedOne copies one file, checking that it is still the one scanned, and
// returns the copy's identity.
func seedOne(src, dst *os.File, rel string, want FolderFile) (seedID, error) {
	in, _, err := openRegular(src, rel)
	if err != nil {
		return seedID{}, err
	}
	defer in.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(in.Fd()), &st); err != nil {
		return seedID{}, err
	}
	if st.Ino != want.Ino {
		return seedID{}, fmt.Errorf("replaced while the run started")
	}
	mode := os.FileMode(0o644)
	if want.Mode&0o111 != 0 {
		mode = 0o755
	}
	out, err := openBeneath(dst, rel, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode, false)
	if err != nil {
		return seedID{}, err
	}
	defer out.Close()
	if st.Blocks*512 < st.Size {
		// Sparse: its holes stay holes in the copy, as cp's do.
		err = sparse.Copy(out, in)
	} else {
		_, err = io.Copy(out, in)
	}
	if err != nil {
		return seedID{}, err
	}
	mt := time.Unix(0, want.MTime)
	_ = unix.Futimes(int(out.Fd()), []unix.Timeval{unix.NsecToTimeval(time.Now().UnixNano()), unix.NsecToTimeval(mt.UnixNano())})
	if err := unix.Fstat(int(out.Fd()), &st); err != nil {
		return seedID{}, err
	}
	return seedID{ino: st.Ino, ctime: st.Ctim.Nano()}, out.Close()
}

// roomReserve is what a folder's copy leaves free on the disk it goes to
// (or a tenth of that disk, when smaller): the run's own writes, the store
// and other programs need room too.
const roomReserve = 1 << 30

// CheckRoom refuses, before anything is copied, a folder whose copy would
// not fit on the file system of dir (where the run's workspace is made)
// with its reserve to spare: an error wrapping ErrFolderTooLarge that says
// how much the folder takes and how much is free.
func (f *Folder) CheckRoom(dir string) error {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return fmt.Errorf("room for the folder's copy in %s: %w", dir, err)
	}
	entries := uint64(len(f.Files) + len(f.Dirs))
	free := int64(st.Bavail) * int64(st.Bsize)
	reserve := min(roomReserve, int64(st.Blocks)*int64(st.Bsize)/10)
	need := f.Disk + int64(entries)*4096 + reserve
	switch {
	case need > free:
		return fmt.Errorf("folder %s takes %s on disk in %d files: its copy for the run does not fit in %s, which has %s free (%s kept in reserve): %w",
			f.Dir, sandbox.FormatSize(f.Disk), len(f.Files), dir, sandbox.FormatSize(free), sandbox.FormatSize(reserve), ErrFolderTooLarge)
	case st.Files > 0 && entries+1000 > st.Ffree:
		return fmt.Errorf("folder %s holds %d files and directories: %s has %d inodes free: %w", f.Dir, entries, dir, st.Ffree, ErrFolderTooLarge)
	}
	return nil
}
