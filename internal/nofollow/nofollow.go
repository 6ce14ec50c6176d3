// Package nofollow opens paths beneath a directory without following a
// symbolic link at any component: the one implementation of "never follow
// a link" for every caller (workspaces, the backends' merges and syncs,
// the disk watcher). openat2 with RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|
// RESOLVE_NO_MAGICLINKS does it in one call; on kernels before 5.6
// (ENOSYS) Walk does it with one O_NOFOLLOW openat per component.
//
// A link anywhere on the way is ELOOP; with SameMount, a file system
// mounted on the way (RESOLVE_NO_XDEV) is EXDEV.
package nofollow

// How says how to open the last component.
type How struct {
	// Flags are open(2) flags for the last component; O_NOFOLLOW and
	// O_CLOEXEC are always added.
	Flags int
	// Mode is the mode of a file that Flags create.
	Mode uint32
	// SameMount refuses to cross into another file system mounted below
	// the directory (EXDEV).
	SameMount bool
}

// MountID identifies the mount an open file lies on: its device and, where
// the kernel tells (statx, Linux 5.8), its mount ID, which also tells a
// bind mount of a directory of the same file system apart.
type MountID struct {
	Dev uint64
	Mnt uint64 // 0: unknown
}

// Same reports whether m and o are the same mount, as far as both tell.
func (m MountID) Same(o MountID) bool {
	return m.Dev == o.Dev && (m.Mnt == 0 || o.Mnt == 0 || m.Mnt == o.Mnt)
}
