package store

import (
	"errors"
	"os"
	"strings"
	"syscall"
)

// ErrDiskFull marks errors caused by a full disk (or an exhausted quota)
// under the data directory.
var ErrDiskFull = errors.New("no space left on the disk of the data directory")

// IsDiskFull reports whether err comes from a full disk: SQLite's
// SQLITE_FULL, ENOSPC or EDQUOT.
func IsDiskFull(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, ErrDiskFull) || errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return true
	}
	var ce interface{ Code() int }
	if errors.As(err, &ce) && ce.Code()&0xff == 13 { // SQLITE_FULL
		return true
	}
	return strings.Contains(err.Error(), "database or disk is full")
}

// reserveSize is the room kept beside the database so that, once the disk
// is full, a run can still record how it ended (the end of its turn, the
// audit record saying its records could not be written).
const reserveSize = 256 << 10

func (s *Store) reservePath() string { return s.path + ".reserve" }

// keepReserve makes the reserve file if it is missing (and there is room).
func (s *Store) keepReserve() {
	if s.path == "" {
		return
	}
	p := s.reservePath()
	if fi, err := os.Lstat(p); err == nil && fi.Mode().IsRegular() && fi.Size() >= reserveSize {
		return
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return
	}
	_, err = f.Write(make([]byte, reserveSize)) // written, not sparse: the blocks are taken
	if cerr := f.Close(); err != nil || cerr != nil {
		os.Remove(p)
	}
}

// WithReserve runs write; when it fails because the disk is full, it frees
// the reserve and runs it once more. Use it for the records that close a
// run, not for those that let it go on.
func (s *Store) WithReserve(write func() error) error {
	err := write()
	if !IsDiskFull(err) || s.path == "" {
		return err
	}
	if rerr := os.Remove(s.reservePath()); rerr != nil {
		return err
	}
	return write()
}
