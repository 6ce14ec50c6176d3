package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// ErrSymlinkInPath is wrapped by ResolveDir's error when a component
// of a workspace path is a symbolic link that codeagent may not follow.
var ErrSymlinkInPath = errors.New("a component of the path is a symbolic link")

// ResolveDir returns the absolute, link-free form of an existing directory
// given by a caller (a workspace, a data directory, $TMPDIR). A sandboxed
// program can leave symbolic links in its workspace (data -> /etc), so a
// later run given a path through one would mount a host directory
// read-write: ResolveDir refuses any component that is a symbolic link,
// unless the link belongs to root (the system's own layout, such as
// /home -> /srv/home; codeagent never runs a program as host uid 0) and
// lies outside every marked workspace. Missing components are an error;
// the caller creates the directory first if it wants one.
func ResolveDir(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("workspace %s: %w", dir, err)
	}
	resolved, err := resolveNoForeignLinks(abs, 0)
	if err != nil {
		return "", fmt.Errorf("workspace %s: %w", dir, err)
	}
	fi, err := os.Lstat(resolved)
	if err != nil {
		return "", fmt.Errorf("workspace %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("workspace %s is not a directory", dir)
	}
	return resolved, nil
}

// resolveNoForeignLinks walks abs one component at a time, following only
// root-owned links, at most 40 of them.
func resolveNoForeignLinks(abs string, depth int) (string, error) {
	parts := strings.Split(strings.TrimPrefix(filepath.Clean(abs), "/"), "/")
	cur := "/"
	for i, p := range parts {
		if p == "" {
			continue
		}
		next := filepath.Join(cur, p)
		fi, err := os.Lstat(next)
		if err != nil {
			return "", err
		}
		if fi.Mode()&os.ModeSymlink == 0 {
			cur = next
			continue
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		target, rerr := os.Readlink(next)
		if !ok || st.Uid != 0 || rerr != nil {
			if rerr != nil {
				target = "?"
			}
			return "", fmt.Errorf("%w: %s -> %s (made by uid %d, not root); give the directory's real path if you trust it",
				ErrSymlinkInPath, next, target, ownerOf(st))
		}
		// A root-owned link inside a workspace may still be a program's:
		// programs of a root codeagent can be host root, and a backend
		// that copies a workspace back creates the links it finds as root.
		if ws, in := insideWorkspace(cur); in {
			return "", fmt.Errorf("%w: %s -> %s is inside %s, where codeagent ran programs that could have made it; give the directory's real path if you trust it",
				ErrSymlinkInPath, next, target, ws)
		}
		if depth >= 40 {
			return "", fmt.Errorf("too many levels of symbolic links at %s", next)
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(cur, target)
		}
		rest := filepath.Join(append([]string{target}, parts[i+1:]...)...)
		return resolveNoForeignLinks(rest, depth+1)
	}
	return cur, nil
}

func ownerOf(st *syscall.Stat_t) int64 {
	if st == nil {
		return -1
	}
	return int64(st.Uid)
}
