package workspace

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/codeagent/codeagent/internal/nofollow"
	"github.com/codeagent/codeagent/sandbox"
)

// Directories that codeagent creates or copies into are reached without
// following links a program could have planted: the part of a path that a
// user gave and that exists is resolved by sandbox.ResolveDir (root's
// own layout links only, and none inside a workspace), and everything
// codeagent creates beneath it is made and opened one component at a time
// with O_NOFOLLOW, or with openat2's RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS.

// CheckDir reports the error MkdirAll would give for dir's existing part,
// without creating anything: a symbolic link a program could have made, or
// a component that is not a directory.
func CheckDir(dir string) error {
	_, _, err := resolveExisting(dir)
	return err
}

// CheckWorkdir is CheckDir for a directory that programs' files go to (a
// workspace, an output directory): it also refuses, before anything is
// created, a directory that must not be one, such as /etc or a home
// directory itself (see sandbox.CheckWorkspaceDir; the error wraps
// sandbox.ErrUnsafeWorkspace).
func CheckWorkdir(dir string) error {
	base, missing, err := resolveExisting(dir)
	if err != nil {
		return err
	}
	return sandbox.CheckWorkspaceDir(filepath.Join(append([]string{base}, missing...)...))
}

// MkdirAll returns the absolute, link-free path of the directory dir,
// creating it and its missing parents with perm. The existing part is
// resolved as sandbox.ResolveDir does (its error wraps
// sandbox.ErrSymlinkInPath for a link a program could have made); the rest
// is created beneath it without following any link.
func MkdirAll(dir string, perm os.FileMode) (string, error) {
	base, missing, err := resolveExisting(dir)
	if err != nil {
		return "", err
	}
	if len(missing) == 0 {
		return base, nil
	}
	return MkdirBeneath(base, strings.Join(missing, "/"), perm)
}

// resolveExisting splits dir into its longest existing prefix, resolved,
// and the names below it that do not exist yet.
func resolveExisting(dir string) (string, []string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", nil, err
	}
	var missing []string
	for p := abs; ; p = filepath.Dir(p) {
		resolved, err := sandbox.ResolveDir(p)
		if err == nil {
			return resolved, missing, nil
		}
		if !errors.Is(err, fs.ErrNotExist) || p == "/" {
			if inner := errors.Unwrap(err); inner != nil {
				return "", nil, inner // without ResolveDir's "workspace DIR:"
			}
			return "", nil, fmt.Errorf("%s is not a directory", p)
		}
		missing = append([]string{filepath.Base(p)}, missing...)
	}
}

// MkdirBeneath creates the slash-separated relative path rel beneath the
// link-free directory base, one component at a time, and returns its path.
// No link is followed, not even root's: base is codeagent's, so a link
// below it was planted, and the error wraps sandbox.ErrSymlinkInPath.
func MkdirBeneath(base, rel string, perm os.FileMode) (string, error) {
	if err := validRel(rel); err != nil {
		return "", err
	}
	d, err := sandbox.OpenWorkspace(base)
	if err != nil {
		return "", err
	}
	defer d.Close()
	f, err := mkdirAt(d, rel, perm)
	if err != nil {
		return "", err
	}
	f.Close()
	return filepath.Join(base, rel), nil
}

// MkdirTemp creates a new directory, mode 0700, with a random name starting
// with prefix in the link-free directory base, and returns its path.
func MkdirTemp(base, prefix string) (string, error) {
	d, err := sandbox.OpenWorkspace(base)
	if err != nil {
		return "", err
	}
	defer d.Close()
	for range 100 {
		var b [8]byte
		_, _ = rand.Read(b[:])
		name := prefix + hex.EncodeToString(b[:])
		err := unix.Mkdirat(int(d.Fd()), name, 0o700)
		if err == nil {
			return filepath.Join(base, name), nil
		}
		if !errors.Is(err, unix.EEXIST) {
			return "", fmt.Errorf("create a directory in %s: %w", base, err)
		}
	}
	return "", fmt.Errorf("create a directory in %s: no free name", base)
}

// TempDir is the system's temporary directory ($TMPDIR or /tmp), created
// if missing and resolved as MkdirAll does.
func TempDir() (string, error) {
	dir, err := MkdirAll(os.TempDir(), 0o755)
	if err != nil {
		return "", fmt.Errorf("temporary directory: %w", err)
	}
	return dir, nil
}

// mkdirAt creates rel beneath the directory d, without following links,
// and returns the last directory opened as O_PATH.
func mkdirAt(d *os.File, rel string, perm os.FileMode) (*os.File, error) {
	fd := int(d.Fd())
	own := -1 // the descriptor this walk opened last
	defer func() {
		if own >= 0 {
			unix.Close(own)
		}
	}()
	parts := strings.Split(rel, "/")
	for i, name := range parts {
		sofar := strings.Join(parts[:i+1], "/")
		if err := unix.Mkdirat(fd, name, uint32(perm.Perm())); err != nil && !errors.Is(err, unix.EEXIST) {
			return nil, &os.PathError{Op: "mkdir", Path: filepath.Join(d.Name(), sofar), Err: err}
		}
		next, err := unix.Openat(fd, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, linkError(fd, d.Name(), sofar, err)
		}
		if own >= 0 {
			unix.Close(own)
		}
		own, fd = next, next
	}
	f := os.NewFile(uintptr(own), rel)
	own = -1
	return f, nil
}

// linkError turns the error of opening name (below the directory dir at
// dirfd) without following it into a clear one when name is a link.
func linkError(dirfd int, dir, name string, err error) error {
	var st unix.Stat_t
	if unix.Fstatat(dirfd, path.Base(name), &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK ||
		errors.Is(err, unix.ELOOP) {
		return symlinkError(filepath.Join(dir, name))
	}
	return &os.PathError{Op: "open", Path: filepath.Join(dir, name), Err: err}
}

// symlinkError says that p is a symbolic link that is not followed.
type symlinkError string

func (e symlinkError) Error() string {
	return string(e) + " is a symbolic link, which codeagent did not make and does not follow"
}
func (e symlinkError) Unwrap() error { return sandbox.ErrSymlinkInPath }

// openBeneath opens the slash-separated path rel beneath the directory d
// with flags, following no symbolic link at any component (package
// nofollow). With sameMount it does not cross into another
// file system mounted below d either (RESOLVE_NO_XDEV): reads of a
// workspace reach only what its walks list.
func openBeneath(d *os.File, rel string, flags int, perm os.FileMode, sameMount bool) (*os.File, error) {
	if err := validRel(rel); err != nil {
		return nil, err
	}
	fd, err := nofollow.Open(int(d.Fd()), rel, nofollow.How{Flags: flags, Mode: uint32(perm.Perm()), SameMount: sameMount})
	switch {
	case errors.Is(err, unix.ELOOP):
		return nil, fmt.Errorf("%s: %w, which codeagent does not follow", rel, sandbox.ErrSymlinkInPath)
	case errors.Is(err, unix.EXDEV):
		return nil, fmt.Errorf("%s: another file system is mounted on its way, which codeagent does not reach into: %w", rel, err)
	case err != nil:
		return nil, &os.PathError{Op: "open", Path: rel, Err: err}
	}
	return os.NewFile(uintptr(fd), rel), nil
}
