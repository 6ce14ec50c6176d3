//go:build linux && (amd64 || arm64)

package namespace

import (
	"math"

	"golang.org/x/sys/unix"
)

// markCloseOnExec marks every descriptor of this process above stderr
// close-on-exec. bwrap passes on whatever it inherits, so a descriptor the
// host program opened without the flag (a directory, a socket) would reach
// the sandbox and lead out of it. Descriptors meant for the sandbox are
// duplicated for the child by os/exec after this.
func markCloseOnExec() {
	_ = unix.CloseRange(3, math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC)
}
