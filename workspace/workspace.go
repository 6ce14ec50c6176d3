// Package workspace manages the directory a generated program runs in: it
// creates or keeps it, copies inputs in under validated names, writes the
// agent's own files without following links, snapshots it to list what a
// program created or changed, and copies those artifacts out safely.
//
// Everything a sandboxed program leaves behind is hostile: symbolic links to
// host files, FIFOs that block a reader, devices, huge files, deep trees.
// Every access here goes through an os.Root (no path may resolve outside the
// workspace), refuses to follow a final symbolic link, opens without
// blocking, checks the file type on the open descriptor, and is bounded in
// count and size.
package workspace

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/codeagent/codeagent/internal/lazyre"
	"github.com/codeagent/codeagent/lang"
	"github.com/codeagent/codeagent/procid"
	"github.com/codeagent/codeagent/sandbox"
)

// Workspace is one directory on the host, mounted into the sandbox.
type Workspace struct {
	// Dir is the absolute host path.
	Dir  string
	temp bool
	own  bool // codeagent's own directory (temporary or in a data directory)
}

// New returns the workspace at dir, created if missing, or a fresh
// temporary directory when dir is "" (removed by Close). A component of dir
// that is a symbolic link a program could have made is refused (see
// MkdirAll): a link left by an earlier run would mount a host directory.
// So is, before anything is created, a directory that must not be a
// workspace, such as /etc or a home directory itself (see CheckWorkdir).
func New(dir string) (*Workspace, error) {
	if dir == "" {
		base, err := TempDir()
		if err != nil {
			return nil, fmt.Errorf("create workspace: %w", err)
		}
		// Dead processes' temporary workspaces go in the background: the
		// listing of a busy temporary directory need not delay a run.
		sweepOnce.Do(func() { go func() { _, _ = SweepTemp(base, "codeagent-ws-") }() })
		return NewTemp(base, "codeagent-ws-")
	}
	if err := CheckWorkdir(dir); err != nil {
		return nil, fmt.Errorf("workspace %s: %w", dir, err)
	}
	abs, err := MkdirAll(dir, 0o755)
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %w", dir, err)
	}
	return marked(&Workspace{Dir: abs})
}

// NewBeneath returns the workspace at the relative path rel beneath the
// link-free directory base (a data directory), created without following
// any link: every component is codeagent's own, so that a program cannot
// redirect a session's workspace by replacing one of them.
func NewBeneath(base, rel string) (*Workspace, error) {
	if err := sandbox.CheckWorkspaceDir(filepath.Join(base, rel)); err != nil {
		return nil, fmt.Errorf("workspace: %w", err)
	}
	dir, err := MkdirBeneath(base, rel, 0o700)
	if err != nil {
		return nil, fmt.Errorf("workspace: %w", err)
	}
	return marked(&Workspace{Dir: dir, own: true})
}

var sweepOnce sync.Once

// NewTemp creates a workspace with a fresh name starting with prefix and
// this process's tag (see procid.Tag) in the link-free directory base;
// Close removes it, and SweepTemp the ones a dead process left.
func NewTemp(base, prefix string) (*Workspace, error) {
	if err := sandbox.CheckWorkspaceDir(filepath.Join(base, procid.Prefix(prefix))); err != nil {
		return nil, fmt.Errorf("create workspace: %w", err)
	}
	dir, err := MkdirTemp(base, procid.Prefix(prefix))
	if err != nil {
		return nil, fmt.Errorf("create workspace: %w", err)
	}
	return marked(&Workspace{Dir: dir, temp: true, own: true})
}

// SweepTemp removes the temporary workspaces named prefix+tag in base
// whose process is dead (killed before its Close), never one of a live
// process. It returns how many it removed.
func SweepTemp(base, prefix string) (int, error) {
	return procid.Sweep(base, prefix, RemoveAll)
}

// marked marks w's directory as a workspace (see sandbox.MarkWorkspace); a
// file system without trusted attributes goes without the mark.
func marked(w *Workspace) (*Workspace, error) {
	if err := sandbox.MarkWorkspace(w.Dir); err != nil && !errors.Is(err, syscall.ENOTSUP) {
		if w.temp {
			_ = RemoveAll(w.Dir)
		}
		return nil, err
	}
	return w, nil
}

// KeepsCache reports whether programs in w may keep build caches in its
// lang.CacheDir between executions: only in codeagent's own workspaces
// (temporary ones, a session's), never in a directory of the user's
// (--workdir), which must not gain a directory it did not ask for.
func (w *Workspace) KeepsCache() bool { return w.own }

// isOwn reports whether rel, relative to a workspace, is codeagent's own
// directory (lang.OwnDir: the program, its tests) or its cache
// (lang.CacheDir), which listings, snapshots and a folder's changes leave
// out, and which are never copied from a folder.
func isOwn(rel string) bool { return rel == lang.CacheDir || rel == lang.OwnDir }

// Temporary reports whether Close removes the directory.
func (w *Workspace) Temporary() bool { return w.temp }

// Close removes a temporary workspace, but nothing on another file system
// mounted below it (see RemoveAll); a kept one stays.
func (w *Workspace) Close() error {
	if !w.temp {
		return nil
	}
	return RemoveAll(w.Dir)
}

var nameRE = lazyre.New(`^[A-Za-z0-9_][A-Za-z0-9._ +-]{0,199}$`)

// ValidName reports whether name is a plain file name the workspace accepts
// for inputs and its own files: no directory, no "..", no leading dot or
// dash, no control characters.
func ValidName(name string) bool {
	return nameRE.MatchString(name) && !strings.Contains(name, "..")
}

// validRel checks a slash-separated relative path of an artifact.
func validRel(rel string) error {
	if rel == "" || strings.HasPrefix(rel, "/") || strings.ContainsRune(rel, 0) {
		return fmt.Errorf("invalid path %q", rel)
	}
	for _, part := range strings.Split(rel, "/") {
		if part == "" || part == "." || part == ".." {
			return fmt.Errorf("invalid path %q", rel)
		}
	}
	return nil
}

// WriteFile writes data to the plain file name in the workspace, or to
// lang.OwnDir + "/" + name, codeagent's own directory (made when missing).
// Whatever is there under that name (a file, a symbolic link to a host
// file, a directory a program made, even in place of the own directory)
// is removed first, and the new file is created exclusively without
// following links, so a program cannot redirect the write.
func (w *Workspace) WriteFile(name string, data []byte) error {
	dir, base := "", name
	if d, b, ok := strings.Cut(name, "/"); ok && d == lang.OwnDir {
		dir, base = d, b
	}
	if !ValidName(base) {
		return fmt.Errorf("workspace: invalid file name %q", name)
	}
	root, err := os.OpenRoot(w.Dir)
	if err != nil {
		return fmt.Errorf("workspace: %w", err)
	}
	defer root.Close()
	if dir != "" {
		if root, err = ownDir(root, dir); err != nil {
			return fmt.Errorf("workspace: %s: %w", dir, err)
		}
		defer root.Close()
	}
	if err := root.RemoveAll(base); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("workspace: replace %s: %w", name, err)
	}
	f, err := root.OpenFile(base, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return fmt.Errorf("workspace: write %s: %w", name, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("workspace: write %s: %w", name, err)
	}
	return f.Close()
}

// ownDir opens the directory dir of root, made when missing; anything else
// there (a link a program planted, a file) is removed first. The root
// never leaves the workspace, even should a program swap the name.
func ownDir(root *os.Root, dir string) (*os.Root, error) {
	for range 3 { // removed, made, opened
		fi, err := root.Lstat(dir)
		switch {
		case err == nil && fi.IsDir():
			return root.OpenRoot(dir)
		case errors.Is(err, os.ErrNotExist):
			if err := root.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
				return nil, err
			}
		case err != nil:
			return nil, err
		default:
			if err := root.RemoveAll(dir); err != nil {
				return nil, err
			}
		}
	}
	return nil, fmt.Errorf("not a directory")
}

// CopyIn copies the host file src into the workspace under its base name
// and returns that name. The name must be valid (see ValidName) and src a
// regular file of at most maxSize bytes (0: no limit).
func (w *Workspace) CopyIn(src string, maxSize int64) (string, error) {
	name := filepath.Base(src)
	if !ValidName(name) {
		return "", fmt.Errorf("input %s: the file name must be plain letters, digits, '.', '_', '-', '+' or spaces", src)
	}
	in, err := os.Open(src)
	if err != nil {
		return "", fmt.Errorf("input: %w", err)
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return "", fmt.Errorf("input: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("input %s is not a regular file", src)
	}
	if maxSize > 0 && fi.Size() > maxSize {
		return "", fmt.Errorf("input %s is larger than %d bytes", src, maxSize)
	}
	root, err := os.OpenRoot(w.Dir)
	if err != nil {
		return "", fmt.Errorf("workspace: %w", err)
	}
	defer root.Close()
	if _, err := root.Lstat(name); err == nil {
		return "", fmt.Errorf("input %s: %s is already in the workspace", src, name)
	}
	out, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return "", fmt.Errorf("input: %w", err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return "", fmt.Errorf("input %s: %w", src, err)
	}
	return name, out.Close()
}

// OpenRegular opens the regular file rel (slash-separated) in the
// workspace for reading. No symbolic link is followed at any component, a
// FIFO does not block the open, and the type is checked on the descriptor.
func (w *Workspace) OpenRegular(rel string) (*os.File, os.FileInfo, error) {
	d, err := sandbox.OpenWorkspace(w.Dir)
	if err != nil {
		return nil, nil, err
	}
	defer d.Close()
	return openRegular(d, rel)
}

// openRegular opens rel beneath the directory d as OpenRegular does.
func openRegular(d *os.File, rel string) (*os.File, os.FileInfo, error) {
	f, err := openBeneath(d, rel, os.O_RDONLY|syscall.O_NONBLOCK, 0, true)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, fmt.Errorf("%s is not a regular file", rel)
	}
	return f, fi, nil
}
