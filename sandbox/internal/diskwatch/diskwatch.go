// Package diskwatch enforces a sandbox's disk limit on a host directory
// tree that the sandboxed program writes to: the namespace backend's
// workspace and the Docker backend's staging directory.
//
// On Linux every directory of the tree has an inotify watch (added as
// directories appear, and each new directory is listed after its watch is
// added, so that nothing created in between is missed), and each batch of
// events updates an account of the tree at once: every entry is charged its
// allocated blocks (files, directories, symbolic links, FIFOs; fallocated
// space and extended-attribute blocks are in the blocks) plus InodeCost,
// a regular file at least its size, and hard links once. When the kernel's
// event queue overflows the account is rebuilt by a full scan, and a full
// walk now and then checks the account from scratch. The callback runs as
// soon as the tree has grown past the limit, has more than Limits.Entries
// new names, or is deeper than MaxDepth.
//
// What a watcher cannot bound is what a program allocates in one system
// call before the callback's kill lands (fallocate of any size with
// FALLOC_FL_KEEP_SIZE, which RLIMIT_FSIZE does not limit), and files the
// program has unlinked but keeps open, which no name leads to. Backends
// deny fallocate in their seccomp filters; the Docker backend also puts its
// staging directory on a file system of the limit's size where it can.
package diskwatch

import "time"

// Limits bound a tree's growth from the moment the watch starts.
type Limits struct {
	// Bytes is the growth allowed, as charged (see the package comment).
	Bytes int64
	// Entries is how many names may be added; MaxEntries when 0.
	Entries int
}

const (
	// MaxEntries is the default cap on new names: a full walk of the
	// workspace with 20 000 more entries takes about 20 ms here, so the
	// backstop walk stays cheap and a rebuild after an overflow quick.
	MaxEntries = 20_000
	// MaxDepth is the deepest directory the watcher follows; a deeper one
	// exceeds the limits (a walk keeps one descriptor per level open).
	MaxDepth = 256
	// InodeCost is charged for every entry besides its blocks: an ext4
	// inode (which is what an entry costs in the Docker backend's staging
	// file system image, and a fair price anywhere).
	InodeCost = 256
)

// The backstop walk runs at 20 times its own cost, at least every
// minBackstop; without inotify every walkOnlyInterval (at 10 times its cost).
const (
	minBackstop      = 200 * time.Millisecond
	walkOnlyInterval = 10 * time.Millisecond
)
