package workspace

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/codeagent/codeagent/sandbox"
)

// WriteRel writes data to the slash-separated relative path rel, creating
// the directories it names. Every component must be a valid name (see
// ValidName), no link is followed at any of them (one planted there is an
// error wrapping sandbox.ErrSymlinkInPath), and a file already at rel, or a
// link, is replaced rather than written through; a directory there is an
// error. It is how a model's write_file reaches the workspace.
func (w *Workspace) WriteRel(rel string, data []byte) error {
	if err := validRel(rel); err != nil {
		return err
	}
	for _, part := range strings.Split(rel, "/") {
		if !ValidName(part) {
			return fmt.Errorf("invalid path %q: each name must be plain letters, digits, '.', '_', '-', '+' or spaces, not starting with a dot or dash", rel)
		}
	}
	root, err := sandbox.OpenWorkspace(w.Dir)
	if err != nil {
		return err
	}
	defer root.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(root.Fd()), &st); err != nil {
		return err
	}
	// What is created belongs to the workspace's owner, so that a kernel
	// running meanwhile (the sandbox's user, to whom the workspace was
	// handed) can change it. Best effort: without the right to, the
	// files stay codeagent's, readable by all.
	own := func(fd int) { _ = unix.Fchownat(fd, "", int(st.Uid), int(st.Gid), unix.AT_EMPTY_PATH) }
	dirfd, parts := int(root.Fd()), strings.Split(rel, "/")
	for i, name := range parts[:len(parts)-1] {
		err := unix.Mkdirat(dirfd, name, 0o755)
		if err != nil && !errors.Is(err, unix.EEXIST) {
			return &os.PathError{Op: "mkdir", Path: strings.Join(parts[:i+1], "/"), Err: err}
		}
		created := err == nil
		next, err := unix.Openat(dirfd, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return linkError(dirfd, "", strings.Join(parts[:i+1], "/"), err)
		}
		defer unix.Close(next)
		if created {
			own(next)
		}
		dirfd = next
	}
	base := parts[len(parts)-1]
	if err := unix.Unlinkat(dirfd, base, 0); err != nil && !errors.Is(err, unix.ENOENT) {
		if errors.Is(err, unix.EISDIR) || errors.Is(err, unix.EPERM) {
			return fmt.Errorf("%s is a directory", rel)
		}
		return &os.PathError{Op: "replace", Path: rel, Err: err}
	}
	fd, err := unix.Openat(dirfd, base, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return &os.PathError{Op: "create", Path: rel, Err: err}
	}
	own(fd)
	f := os.NewFile(uintptr(fd), rel)
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", rel, err)
	}
	return f.Close()
}
