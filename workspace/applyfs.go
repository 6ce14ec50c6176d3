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

	"golang.org/x/sys/unix"

	"github.com/codeagent/codeagent/procid"
)

// dirCache opens the directories beneath root once each, without
// following links: an apply of a thousand files in a hundred directories
// walks a hundred paths, not a thousand.
type dirCache struct {
	root *os.File
	fds  map[string]int
}

func newDirCache(root *os.File) *dirCache { return &dirCache{root: root, fds: map[string]int{}} }

// open returns the directory rel ("" is root), made when missing and
// create is set (see openParent). The descriptor stays the cache's.
func (d *dirCache) open(rel string, create bool) (int, error) {
	if fd, ok := d.fds[rel]; ok {
		return fd, nil
	}
	fd, err := openParent(d.root, rel, create)
	if err != nil {
		return -1, err
	}
	d.fds[rel] = fd
	return fd, nil
}

// stat is lstat of rel: ENOENT when it or a directory on its way is
// missing, ELOOP for a link on its way.
func (d *dirCache) stat(rel string, st *unix.Stat_t) error {
	pfd, err := d.open(dirOf(rel), false)
	if err != nil {
		return err
	}
	return unix.Fstatat(pfd, path.Base(rel), st, unix.AT_SYMLINK_NOFOLLOW)
}

// openFile opens the regular file rel for reading, following no link and
// not blocking on a FIFO.
func (d *dirCache) openFile(rel string) (*os.File, error) {
	pfd, err := d.open(dirOf(rel), false)
	if err != nil {
		return nil, err
	}
	fd, err := unix.Openat(pfd, path.Base(rel), unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), rel)
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s is not a regular file", rel)
	}
	return f, nil
}

func (d *dirCache) close() {
	for _, fd := range d.fds {
		unix.Close(fd)
	}
	d.fds = nil
}

// applyTempPrefix starts the names of the files an apply writes beside
// the ones it replaces; the writer's procid tag follows, so that a later
// apply knows the leftovers of a killed one.
const applyTempPrefix = ".codeagent-apply-"

// writeBeside writes in to a new file of a fresh name in the directory
// pfd, with mode and, when root writes, the owner uid:gid, and returns
// its name.
func writeBeside(pfd int, in io.Reader, mode uint32, uid, gid int) (string, error) {
	var b [6]byte
	var name string
	fd := -1
	for range 10 {
		rand.Read(b[:])
		name = applyTempPrefix + procid.Self().Tag() + "-" + hex.EncodeToString(b[:])
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

// sweep removes, from the existing directories the changes go to, the
// temporary files of applies whose process is dead (killed on the way):
// a new file not yet in place, or the old contents of one just replaced.
// Those of a live apply, and names without a tag, are left alone.
func (a *applier) sweep(changes []Change) {
	seen := map[string]bool{}
	for _, c := range changes {
		dir := dirOf(c.Path)
		if seen[dir] {
			continue
		}
		seen[dir] = true
		pfd, err := a.folder.open(dir, false)
		if err != nil {
			continue
		}
		sweepDir(pfd)
	}
}

func sweepDir(pfd int) {
	dfd, err := unix.Openat(pfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	d := os.NewFile(uintptr(dfd), ".")
	defer d.Close()
	for {
		names, err := d.Readdirnames(1024)
		for _, n := range names {
			if !strings.HasPrefix(n, applyTempPrefix) {
				continue
			}
			if alive, ok := procid.TagAlive(n, applyTempPrefix); !ok || alive {
				continue
			}
			var st unix.Stat_t
			if unix.Fstatat(pfd, n, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFREG {
				unix.Unlinkat(pfd, n, 0)
			}
		}
		if err != nil {
			return
		}
	}
}
