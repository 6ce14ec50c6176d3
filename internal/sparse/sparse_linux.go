package sparse

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// DataRange returns the first range of data at or after off in f, whose
// size is size: [start, end); start is size when only a hole follows.
func DataRange(f *os.File, off, size int64) (int64, int64, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return 0, 0, err
	}
	var start, end int64
	var serr error
	err = rc.Control(func(fd uintptr) {
		start, serr = unix.Seek(int(fd), off, unix.SEEK_DATA)
		if errors.Is(serr, unix.ENXIO) {
			start, end, serr = size, size, nil
			return
		}
		if serr != nil {
			start, end, serr = off, size, nil // no SEEK_DATA: all data
			return
		}
		if end, serr = unix.Seek(int(fd), start, unix.SEEK_HOLE); serr != nil {
			end, serr = size, nil
		}
	})
	if err == nil {
		err = serr
	}
	return start, min(end, size), err
}
