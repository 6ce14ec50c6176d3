package nofollow

import (
	"errors"
	"strings"

	"golang.org/x/sys/unix"
)

// maxChunk keeps each openat2 call below PATH_MAX: a longer rel is opened
// a few thousand bytes at a time, each step beneath the last.
const maxChunk = 4000

// Open opens the slash-separated relative path rel ("" or "." for dirfd
// itself) beneath dirfd and returns its descriptor.
func Open(dirfd int, rel string, how How) (int, error) {
	if rel == "" {
		rel = "."
	}
	if len(rel) <= maxChunk {
		fd, err := open2(dirfd, rel, how)
		if errors.Is(err, unix.ENOSYS) {
			return Walk(dirfd, rel, how)
		}
		return last(dirfd, rel, how, fd, err)
	}
	// Long paths: directories a chunk at a time, the last with how.
	parts := strings.Split(rel, "/")
	fd := dirfd
	closeOwn := func() {
		if fd != dirfd {
			unix.Close(fd)
		}
	}
	for len(parts) > 0 {
		k, size := 0, 0
		for k < len(parts) && (k == 0 || size+len(parts[k])+1 < maxChunk) {
			size += len(parts[k]) + 1
			k++
		}
		step := How{Flags: unix.O_PATH | unix.O_DIRECTORY, SameMount: how.SameMount}
		if k == len(parts) {
			step = how
		}
		next, err := open2(fd, strings.Join(parts[:k], "/"), step)
		if errors.Is(err, unix.ENOSYS) {
			next, err = Walk(fd, strings.Join(parts[:k], "/"), step)
		} else {
			next, err = last(fd, strings.Join(parts[:k], "/"), step, next, err)
		}
		closeOwn()
		if err != nil {
			return -1, err
		}
		fd, parts = next, parts[k:]
	}
	return fd, nil
}

// last refuses what openat2 lets through or names otherwise at the last
// component: a link opened itself (O_PATH|O_NOFOLLOW), or one refused by
// O_DIRECTORY as not a directory; both are ELOOP, as everywhere else.
func last(dirfd int, rel string, how How, fd int, err error) (int, error) {
	if errors.Is(err, unix.ENOTDIR) && how.Flags&unix.O_DIRECTORY != 0 && isLink(dirfd, rel) {
		return -1, unix.ELOOP
	}
	if err != nil {
		return -1, err
	}
	var st unix.Stat_t
	if how.Flags&unix.O_PATH != 0 && unix.Fstat(fd, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
		unix.Close(fd)
		return -1, unix.ELOOP
	}
	return fd, nil
}

func open2(dirfd int, rel string, how How) (int, error) {
	oh := &unix.OpenHow{Flags: uint64(how.Flags | unix.O_NOFOLLOW | unix.O_CLOEXEC), Mode: uint64(how.Mode),
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS}
	if how.SameMount {
		oh.Resolve |= unix.RESOLVE_NO_XDEV
	}
	return unix.Openat2(dirfd, rel, oh)
}

// Walk is Open without openat2, for kernels before 5.6: one O_NOFOLLOW
// openat per component, each directory opened O_PATH, and with SameMount
// the mount of each checked against dirfd's. "..", an absolute path and
// a link at any component are refused as openat2 refuses them.
func Walk(dirfd int, rel string, how How) (int, error) {
	if rel == "" {
		rel = "."
	}
	if strings.HasPrefix(rel, "/") {
		return -1, unix.EXDEV // as RESOLVE_BENEATH refuses to leave dirfd
	}
	parts := strings.Split(strings.TrimSuffix(rel, "/"), "/")
	for _, p := range parts {
		if p == ".." {
			return -1, unix.EXDEV
		}
	}
	fd, own := dirfd, -1
	defer func() {
		if own >= 0 {
			unix.Close(own)
		}
	}()
	var start MountID
	onStart := func(fd int) bool {
		if !how.SameMount {
			return true
		}
		id, err := MountOf(fd)
		return err == nil && start.Same(id)
	}
	if how.SameMount {
		var err error
		if start, err = MountOf(dirfd); err != nil {
			return -1, err
		}
	}
	for _, name := range parts[:len(parts)-1] {
		next, err := unix.Openat(fd, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOTDIR) && isLink(fd, name) {
			err = unix.ELOOP // a link opened O_NOFOLLOW|O_PATH fails O_DIRECTORY
		}
		if err != nil {
			return -1, err
		}
		if own >= 0 {
			unix.Close(own)
		}
		own, fd = next, next
		if !onStart(fd) {
			return -1, unix.EXDEV
		}
	}
	lfd, err := unix.Openat(fd, parts[len(parts)-1], how.Flags|unix.O_NOFOLLOW|unix.O_CLOEXEC, how.Mode)
	if lfd, err = last(fd, parts[len(parts)-1], how, lfd, err); err != nil {
		return -1, err
	}
	if !onStart(lfd) {
		unix.Close(lfd)
		return -1, unix.EXDEV
	}
	return lfd, nil
}

func isLink(dirfd int, name string) bool {
	var st unix.Stat_t
	return unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK
}

// MountOf returns the mount of the open file fd.
func MountOf(fd int) (MountID, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return MountID{}, err
	}
	m := MountID{Dev: uint64(st.Dev)}
	var stx unix.Statx_t
	if unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_MNT_ID, &stx) == nil && stx.Mask&unix.STATX_MNT_ID != 0 {
		m.Mnt = stx.Mnt_id
	}
	return m, nil
}
