//go:build linux && (amd64 || arm64)

package namespace

import (
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/codeagent/codeagent/internal/lateclose"
)

// When the last process of a namespace exits, the kernel tears the
// namespace down in that exit: for a mount namespace it unmounts every
// mount and shuts down the file systems only it used (the sandbox's
// tmpfs, procfs and root; as root, the overlay workspace and its upper
// file system), and bwrap's exit, which Run waits for, waits for that.
// holdNamespaces keeps a reference to the sandbox's mount namespaces and
// the launcher's, so that the teardown happens later, when discard
// closes the references, in the background after the result is returned.
// Nothing runs in a namespace that has no process, and the descriptors
// are close-on-exec: they leave codeagent only for the short-lived
// /usr/bin/true of lateclose.HandOff, which exits at once.

// holdNamespaces opens the mount namespaces of the sandbox's first
// process pid and of the launcher, best effort: without them the teardown
// simply happens in the exits, as before.
func (l *launcher) holdNamespaces(pid int) {
	for _, p := range []int{pid, l.cmd.Process.Pid} {
		fd, err := unix.Open("/proc/"+strconv.Itoa(p)+"/ns/mnt", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err == nil {
			l.held = append(l.held, fd)
		}
	}
}

// releaseNamespaces drops the references holdNamespaces took.
func (l *launcher) releaseNamespaces() {
	for _, fd := range l.held {
		lateclose.Close(lateclose.FD(fd, "mntns"))
	}
	l.held = nil
}
