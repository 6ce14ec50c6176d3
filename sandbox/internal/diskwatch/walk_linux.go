package diskwatch

import "golang.org/x/sys/unix"

// walk measures the tree below the directory open as rootFd from scratch,
// as the incremental account does: every entry's cost (hard links once)
// and the number of names. It never follows symbolic links and stays on
// the root's file system; it opens at most MaxDepth directories at once.
func walk(rootFd int) (int64, int, bool) {
	var st unix.Stat_t
	if unix.Fstat(rootFd, &st) != nil {
		return 0, 0, false
	}
	w := walker{dev: st.Dev, seen: map[uint64]bool{}}
	w.cost = cost(&st)
	w.dir(rootFd, 0)
	return w.cost, w.names, w.tooDeep
}

type walker struct {
	dev     uint64
	seen    map[uint64]bool
	cost    int64
	names   int
	tooDeep bool
}

func (w *walker) dir(fd, depth int) {
	for _, name := range readNames(fd) {
		var st unix.Stat_t
		if unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil || st.Dev != w.dev {
			continue
		}
		w.names++
		isDir := st.Mode&unix.S_IFMT == unix.S_IFDIR
		if !isDir && st.Nlink > 1 {
			if w.seen[st.Ino] {
				continue // another name of a file already counted
			}
			w.seen[st.Ino] = true
		}
		w.cost += cost(&st)
		if !isDir {
			continue
		}
		if depth+1 > MaxDepth {
			w.tooDeep = true
			continue
		}
		cfd, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			continue
		}
		w.dir(cfd, depth+1)
		unix.Close(cfd)
	}
}
