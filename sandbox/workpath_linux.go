package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/codeagent/codeagent/internal/nofollow"
)

// OpenWorkspace opens a directory resolved by ResolveDir (by a backend,
// with backendkit.ResolveWorkspace, which also applies CheckWorkspaceDir)
// as an O_PATH descriptor without following any symbolic link (openat2's
// RESOLVE_NO_SYMLINKS), so that a link planted between the check and the
// open is refused rather than followed. Backends mount or read the
// workspace through this descriptor.
func OpenWorkspace(resolved string) (*os.File, error) {
	if !filepath.IsAbs(resolved) {
		return nil, fmt.Errorf("open workspace %s: not an absolute path", resolved)
	}
	root, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open /: %w", err)
	}
	fd, err := nofollow.Open(root, strings.TrimPrefix(filepath.Clean(resolved), "/"), nofollow.How{Flags: unix.O_PATH | unix.O_DIRECTORY})
	unix.Close(root)
	if errors.Is(err, unix.ELOOP) {
		return nil, fmt.Errorf("workspace %s: %w", resolved, ErrSymlinkInPath)
	}
	if err != nil {
		return nil, fmt.Errorf("open workspace %s: %w", resolved, err)
	}
	return os.NewFile(uintptr(fd), resolved), nil
}

// workspaceMark is the extended attribute that codeagent, run as root, puts
// on each directory it uses as a workspace. Setting or removing a trusted.*
// attribute needs CAP_SYS_ADMIN on the host, which no sandboxed program
// has, so a program can neither forge nor remove the mark.
const workspaceMark = "trusted.codeagent.workspace"

// MarkWorkspace marks dir as a directory that sandboxed programs write in,
// so that ResolveDir refuses symbolic links inside it even when they
// belong to root. It does nothing unless codeagent runs as root (programs
// of another user make links owned by that user, which are refused
// anyway); a file system without trusted attributes makes it fail, and the
// caller may go on without the mark.
func MarkWorkspace(dir string) error {
	if os.Geteuid() != 0 {
		return nil
	}
	if err := unix.Lsetxattr(dir, workspaceMark, []byte("1"), 0); err != nil {
		return fmt.Errorf("mark workspace %s: %w", dir, err)
	}
	return nil
}

// insideWorkspace reports whether the link-free directory dir, or one of
// its ancestors, is marked as a workspace, and which.
func insideWorkspace(dir string) (string, bool) {
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := unix.Lgetxattr(d, workspaceMark, nil); err == nil {
			return d, true
		}
		if d == "/" || d == "." {
			return "", false
		}
	}
}
