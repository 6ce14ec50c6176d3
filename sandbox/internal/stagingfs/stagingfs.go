// Package stagingfs makes the size-limited file systems that bound, by
// construction, what a sandboxed program can write to the host's disk: an
// ext4 file system in a sparse image file, attached to a loop device and
// mounted by the backend. The Docker backend stages each box's workspace
// on one; the namespace backend puts the upper layer of the overlay over
// the workspace on one.
//
// The image only takes host disk for the blocks written to it, and the file
// system refuses what passes its free space with ENOSPC, whatever the
// program creates: data, fallocated space, directories, links. A reserve
// file outside what the program can reach (see Fit) takes the free space
// beyond what a run may write, so one file system serves runs of different
// limits. The host cost per file system beyond the program's data is the
// metadata mke2fs writes (about 50-120 KiB) and 256 bytes of inode table
// per entry the program creates.
package stagingfs

import "errors"

// ErrUnsupported is returned where staging file systems cannot be made.
var ErrUnsupported = errors.New("staging file systems need Linux")

// ReserveName is the reserve file's name in the file system's root.
const ReserveName = "reserve"
