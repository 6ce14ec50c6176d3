// Package sparse copies regular files without filling their holes: the
// Docker backend's staging in and out, the namespace backend's merge of
// an overlay's upper layer into the workspace, and a folder's copy for a
// run (package workspace).
package sparse

import (
	"bytes"
	"io"
	"os"
)

// Copy copies the regular file in to out, which is empty, leaving holes
// where in has holes or blocks of zeros, so that a sparse file stays
// sparse, and gives out in's size.
func Copy(out, in *os.File) error {
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	size := fi.Size()
	buf := make([]byte, 128<<10)
	zero := make([]byte, len(buf))
	for off := int64(0); off < size; {
		start, end, err := DataRange(in, off, size)
		if err != nil {
			return err
		}
		if start >= size {
			break
		}
		for p := start; p < end; {
			n, err := in.ReadAt(buf[:min(int64(len(buf)), end-p)], p)
			if n > 0 && !bytes.Equal(buf[:n], zero[:n]) {
				if _, werr := out.WriteAt(buf[:n], p); werr != nil {
					return werr
				}
			}
			p += int64(n)
			if err == io.EOF {
				end = p
				break
			}
			if err != nil {
				return err
			}
		}
		off = end
	}
	return out.Truncate(size)
}
