package stagingfs

import (
	"os"
	"path/filepath"
	"sync"

	"github.com/codeagent/codeagent/sandbox/internal/sparse"
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
	m map[geometry]*os.File
}{m: map[geometry]*os.File{}}

// Format makes img, an empty file, a sparse image of size bytes (rounded up
// to a block) holding an ext4 file system of 4 KiB blocks with inodes
// inodes, no journal and no blocks reserved for root. Inode tables are not
// zeroed, so they take host disk only as entries are created. It copies a
// template of the same geometry, made on first use in img's directory.
func Format(img *os.File, size int64, inodes int) error {
	t, err := template(filepath.Dir(img.Name()), geometry{size, inodes})
	if err == nil {
		if err = sparse.Copy(img, t); err == nil {
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
	t, err := NewImage(dir)
	if err != nil {
		return nil, err
	}
	err = mkfs(t, g.size, g.inodes)
	_ = os.Remove(t.Name())
	if err != nil {
		t.Close()
		return nil, err
	}
	templates.m[g] = t
	return t, nil
}
