package stagingfs

import (
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"

	"github.com/codeagent/codeagent/procid"
)

// ImagePrefix starts the names of image files; the process that made one
// follows (procid.Tag), so that Sweep can tell those of a process that is
// gone.
const ImagePrefix = "upper-"

var imageSeq atomic.Int64

// NewImage creates an empty image file in dir, named after this process.
func NewImage(dir string) (*os.File, error) {
	name := procid.Prefix(ImagePrefix) + strconv.FormatInt(imageSeq.Add(1), 10) + ".img"
	return os.OpenFile(filepath.Join(dir, name), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
}

// Sweep removes the images in dir whose process no longer runs: what a
// crash left between an image's creation and its removal. It returns how
// many it removed.
func Sweep(dir string) int {
	n, _ := procid.Sweep(dir, ImagePrefix, os.Remove)
	return n
}
