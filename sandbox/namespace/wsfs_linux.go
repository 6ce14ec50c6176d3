//go:build linux && (amd64 || arm64)

package namespace

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/codeagent/codeagent/internal/nofollow"
	"github.com/codeagent/codeagent/internal/sparse"
	"github.com/codeagent/codeagent/sandbox/internal/osthread"
)

// Writing into a host workspace as root. Whatever root does there works
// through descriptors opened one component at a time, never following a
// link, and on a thread of its own whose root directory is the workspace,
// so that even a link followed by mistake cannot lead out of it; and it
// holds the workspace's lock, so that no two of codeagent's writers (the
// merges of runs on one workspace, a kernel's synchronisation) act on it
// at once. No sandboxed process can write to a host workspace: programs
// write to a layer or copy of their own (see upper_linux.go, synced_linux.go).

// inWorkspace runs fn with a descriptor of the workspace directory open as
// ws (an O_PATH descriptor), holding the workspace's lock (flock on the
// directory, shared by every codeagent process of the host; ctx bounds the
// wait for it), on a thread
// whose root directory is the workspace and whose umask is 0 (modes are
// given at creation, never changed by name afterwards).
func inWorkspace(ctx context.Context, ws int, fn func(wfd int) error) error {
	wfd, unlock, err := lockWorkspace(ctx, ws)
	if err != nil {
		return err
	}
	defer unlock()
	return confined(wfd, fn)
}

// lockWorkspace opens the workspace directory open as ws (O_PATH) and
// takes its lock (see inWorkspace); unlock releases both.
func lockWorkspace(ctx context.Context, ws int) (wfd int, unlock func(), err error) {
	wfd, err = openBeneath(ws, "")
	if err != nil {
		return -1, nil, fmt.Errorf("open the workspace: %w", err)
	}
	for delay := 100 * time.Microsecond; ; delay = min(2*delay, 20*time.Millisecond) {
		err = unix.Flock(wfd, unix.LOCK_EX|unix.LOCK_NB)
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			break
		}
		select {
		case <-ctx.Done():
			unix.Close(wfd)
			return -1, nil, fmt.Errorf("wait for the workspace's other writer: %w", ctx.Err())
		case <-time.After(delay):
		}
	}
	if err != nil {
		unix.Close(wfd)
		return -1, nil, fmt.Errorf("lock the workspace: %w", err)
	}
	return wfd, func() { unix.Close(wfd) }, nil // the lock goes with the descriptor
}

// confined runs fn(wfd) on a thread of its own whose root directory is the
// workspace directory open as wfd and whose umask is 0; the thread ends
// afterwards. Paths outside the workspace (/proc, /sys) do not resolve
// there.
func confined(wfd int, fn func(wfd int) error) error {
	return osthread.Run(func() error {
		if err := unix.Unshare(unix.CLONE_FS); err != nil {
			return fmt.Errorf("unshare fs: %w", err)
		}
		if err := unix.Fchdir(wfd); err != nil {
			return err
		}
		if err := unix.Chroot("."); err != nil {
			return fmt.Errorf("confine the merge to the workspace: %w", err)
		}
		unix.Umask(0)
		return fn(wfd)
	})
}

// copyOldXattrs gives fd the extended attributes of entry name of wfd, the
// regular file old describes (checked to be the same inode).
func copyOldXattrs(wfd int, name string, old *unix.Stat_t, fd int) error {
	ofd, err := unix.Openat(wfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(ofd)
	var st unix.Stat_t
	if err := unix.Fstat(ofd, &st); err != nil {
		return err
	}
	if st.Dev != old.Dev || st.Ino != old.Ino {
		return errors.New("the file changed while it was replaced")
	}
	return copyXattrs(ofd, fd)
}

// copyXattrs gives file to the extended attributes of file from (an ACL
// among them), but file capabilities and overlayfs's own: a file whose
// content a program wrote keeps its owner's settings, never a privilege.
func copyXattrs(from, to int) error {
	buf := make([]byte, 4096)
	n, err := unix.Flistxattr(from, buf)
	if errors.Is(err, unix.ERANGE) {
		if n, err = unix.Flistxattr(from, nil); err == nil {
			buf = make([]byte, n)
			n, err = unix.Flistxattr(from, buf)
		}
	}
	if errors.Is(err, unix.ENOTSUP) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, name := range strings.Split(string(buf[:n]), "\x00") {
		if name == "" || name == "security.capability" || strings.HasPrefix(name, "trusted.overlay.") {
			continue
		}
		sz, err := unix.Fgetxattr(from, name, nil)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		val := make([]byte, sz)
		if sz, err = unix.Fgetxattr(from, name, val); err == nil {
			err = unix.Fsetxattr(to, name, val[:sz], 0)
		}
		if err != nil && !errors.Is(err, unix.ENOTSUP) {
			errs = append(errs, fmt.Errorf("extended attribute %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// openBeneath opens directory rel ("" for dir itself) below dir without
// following links or crossing mounts.
func openBeneath(dir int, rel string) (int, error) {
	return nofollow.Open(dir, rel, nofollow.How{Flags: unix.O_RDONLY | unix.O_DIRECTORY, SameMount: true})
}

// openDirAt opens the directory name of dir, not following a link.
func openDirAt(dir int, name string) (int, error) {
	return openBeneath(dir, name)
}

// readlinkAt reads the symbolic link name of dir.
func readlinkAt(dir int, name string) (string, error) {
	for size := 256; ; size *= 2 {
		buf := make([]byte, size)
		n, err := unix.Readlinkat(dir, name, buf)
		if err != nil {
			return "", err
		}
		if n < size {
			return string(buf[:n]), nil
		}
	}
}

// setTimes gives name of dir, or with name "" dir itself, the access and
// modification times of st, not following a link.
func setTimes(dir int, name string, st *unix.Stat_t) error {
	ts := [2]unix.Timespec{st.Atim, st.Mtim}
	if name != "" {
		return unix.UtimesNanoAt(dir, name, ts[:], unix.AT_SYMLINK_NOFOLLOW)
	}
	// futimens(3): utimensat with a null path.
	if _, _, e := unix.Syscall6(unix.SYS_UTIMENSAT, uintptr(dir), 0, uintptr(unsafe.Pointer(&ts[0])), 0, 0, 0); e != 0 {
		return e
	}
	return nil
}

// removeAllAt removes name of dir and, for a directory, everything in it,
// without following links.
func removeAllAt(dir int, name string) error {
	err := unix.Unlinkat(dir, name, 0)
	if err == nil || errors.Is(err, unix.ENOENT) {
		return nil
	}
	if !errors.Is(err, unix.EISDIR) && !errors.Is(err, unix.EPERM) {
		return err
	}
	sub, err := openBeneath(dir, name)
	if err != nil {
		return err
	}
	names, err := readNames(sub)
	if err == nil {
		for _, n := range names {
			if err = removeAllAt(sub, n); err != nil {
				break
			}
		}
	}
	unix.Close(sub)
	if err != nil {
		return err
	}
	return unix.Unlinkat(dir, name, unix.AT_REMOVEDIR)
}

// replacer makes entries where others may be: directly where nothing is
// in the way, else under a temporary name (random per replacer, made with
// O_EXCL or its kind's equivalent) that is then renamed over the old entry
// (a directory there removed first), so that other hard links of a
// replaced file keep their content.
type replacer struct {
	prefix string
	n      int
}

// newReplacer returns a replacer whose temporary names start with what.
func newReplacer(what string) *replacer {
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	return &replacer{prefix: ".codeagent-" + what + "-" + hex.EncodeToString(rnd[:]) + "-"}
}

// put makes entry name of dir with mk; exists and curDir say what is there.
func (r *replacer) put(dir int, name string, exists, curDir bool, mk func(name string) error) error {
	if !exists {
		err := mk(name)
		if err != nil && !errors.Is(err, unix.EEXIST) {
			_ = unix.Unlinkat(dir, name, 0) // what mk made of it
		}
		return err
	}
	r.n++
	tmp := r.prefix + strconv.Itoa(r.n)
	err := mk(tmp)
	if err == nil && curDir {
		err = removeAllAt(dir, name)
	}
	if err == nil {
		err = unix.Renameat(dir, tmp, dir, name)
	}
	if err != nil {
		_ = unix.Unlinkat(dir, tmp, 0)
	}
	return err
}

// newCopy makes name of dir (O_EXCL, following no link) a copy of the open
// regular file src, holes kept, owned by uid:gid, of mode, with the access
// and modification times of times. With old (the entry oldName of dir that
// it is to replace) it first takes old's extended attributes, file
// capabilities aside; the mode comes after them, since an ACL's mask is
// the group bits of the mode.
func newCopy(src *os.File, dir int, name string, uid, gid int, mode uint32, times *unix.Stat_t, oldName string, old *unix.Stat_t) error {
	fd, err := unix.Openat(dir, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	dst := os.NewFile(uintptr(fd), name)
	defer dst.Close()
	if err := sparse.Copy(dst, src); err != nil {
		return err
	}
	if err := unix.Fchown(fd, uid, gid); err != nil {
		return err
	}
	if old != nil {
		if err := copyOldXattrs(dir, oldName, old, fd); err != nil {
			return err
		}
	}
	return errors.Join(unix.Fchmod(fd, mode), setTimes(fd, "", times))
}
