package stagingfs

import (
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/codeagent/codeagent/internal/sparse"
)

// Every sandbox run as root gets a fresh file system (an overlay's upper
// layer, a Docker box's staging area), and starting mke2fs costs about
// 4 ms of CPU each time, more than the rest of the file system's
// preparation. So each process formats one image per geometry (size and
// inode count) and copies it for the next ones: an empty ext4 made with
// lazy inode tables is about 150 KiB of data in a sparse file, which a
// sparse copy writes in a fraction of that time. The template is removed
// from its directory as soon as it is made, so nothing else can change
// it, and only ever read.

type geometry struct {
	size   int64
	inodes int
}

var templates = struct {
	sync.Mutex
	m   map[geometry]*os.File
	dir string // see KeepTemplates
}{m: map[geometry]*os.File{}}

// KeepTemplates keeps the templates in dir, a directory only root can
// write (the namespace backend's image directory), so that later
// processes, each `codeagent exec` for one, copy them instead of running
// mke2fs. Without it they last as long as this process.
func KeepTemplates(dir string) {
	templates.Lock()
	templates.dir = dir
	templates.Unlock()
}

// templateName is a kept template's name in the directory of KeepTemplates
// (not an image name, which Sweep would remove).
func templateName(g geometry) string {
	return "template-v1-" + strconv.FormatInt(g.size, 10) + "-" + strconv.Itoa(g.inodes) + ".ext4"
}

// Format makes img, an empty file, a sparse image of size bytes (rounded up
// to a block) holding an ext4 file system of 4 KiB blocks with inodes
// inodes, no journal and no blocks reserved for root. Inode tables are not
// zeroed, so they take host disk only as entries are created. It copies a
// template of the same geometry, made on first use in img's directory.
func Format(img *os.File, size int64, inodes int) error {
	t, err := template(filepath.Dir(img.Name()), geometry{size, inodes})
	if err == nil {
		if err = sparse.Copy(img, t); err == nil {
			// Start writing the copy back now: the loop device reads with
			// direct I/O, and a direct read of a range that has dirty pages
			// first waits for their write-back (the mount's reads and the
			// first entries' took 1-2 ms more each).
			_ = unix.SyncFileRange(int(img.Fd()), 0, 0, unix.SYNC_FILE_RANGE_WRITE)
			return nil
		}
		if terr := img.Truncate(0); terr != nil {
			return terr
		}
	}
	return mkfs(img, size, inodes)
}

// template returns the formatted image of geometry g, made in dir when
// there is none yet.
func template(dir string, g geometry) (*os.File, error) {
	templates.Lock()
	defer templates.Unlock()
	if t := templates.m[g]; t != nil {
		return t, nil
	}
	if templates.dir != "" {
		dir = templates.dir
		if t := openKept(filepath.Join(dir, templateName(g)), g); t != nil {
			templates.m[g] = t
			return t, nil
		}
	}
	t, err := NewImage(dir)
	if err != nil {
		return nil, err
	}
	err = mkfs(t, g.size, g.inodes)
	if err == nil && templates.dir != "" {
		_ = os.Link(t.Name(), filepath.Join(dir, templateName(g))) // another process's may be there first
	}
	_ = os.Remove(t.Name())
	if err != nil {
		t.Close()
		return nil, err
	}
	templates.m[g] = t
	return t, nil
}

// openKept opens a kept template: a regular file of root's, not a link,
// of the geometry's size; else nil.
func openKept(name string, g geometry) *os.File {
	f, err := os.OpenFile(name, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	var st unix.Stat_t
	if unix.Fstat(int(f.Fd()), &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Uid != 0 ||
		st.Mode&0o022 != 0 || st.Size != (g.size+4095)&^4095 {
		f.Close()
		return nil
	}
	return f
}
