//go:build linux && (amd64 || arm64)

package namespace

import (
	"errors"
	"fmt"
	"os"
	"path"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

// Reading an overlay's upper layer into memory, for mergeUpper.

// maxUpperEntries bounds the upper layer's tree read into memory (the file
// system has fewer inodes, but whiteouts share one).
const maxUpperEntries = 1 << 20

// upperEntry is an entry of the upper layer.
type upperEntry struct {
	name     string
	st       unix.Stat_t
	whiteout bool
	// Directories only:
	opaque   bool
	redirect string
	children []*upperEntry
	// lower is the directory's path in the workspace as it was before the
	// run, whose entries it takes (hasLower); moved says the directory
	// was renamed and is held under that name in the holding directory.
	lower    string
	hasLower bool
	renamed  bool
	held     string
}

// readUpper reads the upper directory open as fd into memory.
func readUpper(fd int) (*upperEntry, error) {
	root := &upperEntry{}
	if err := unix.Fstat(fd, &root.st); err != nil {
		return nil, err
	}
	n := 0
	return root, readUpperDir(fd, root, 0, &n)
}

func readUpperDir(fd int, dir *upperEntry, depth int, n *int) error {
	if depth > 2*256 {
		return errors.New("the upper layer is nested too deeply")
	}
	names, err := readNames(fd)
	if err != nil {
		return err
	}
	sort.Strings(names)
	for _, name := range names {
		if *n++; *n > maxUpperEntries {
			return fmt.Errorf("more than %d entries in the upper layer", maxUpperEntries)
		}
		e := &upperEntry{name: name}
		if err := unix.Fstatat(fd, name, &e.st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return err
		}
		switch e.st.Mode & unix.S_IFMT {
		case unix.S_IFCHR:
			e.whiteout = e.st.Rdev == 0
		case unix.S_IFDIR:
			sub, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				return err
			}
			e.opaque = xattr(sub, "trusted.overlay.opaque") == "y"
			e.redirect = xattr(sub, "trusted.overlay.redirect")
			err = readUpperDir(sub, e, depth+1, n)
			unix.Close(sub)
			if err != nil {
				return err
			}
		}
		dir.children = append(dir.children, e)
	}
	return nil
}

// readNames lists directory fd without closing it.
func readNames(fd int) ([]string, error) {
	dup, err := unix.Openat(fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(dup), "")
	defer f.Close()
	return f.Readdirnames(-1)
}

// xattr is the extended attribute name of fd, or "".
func xattr(fd int, name string) string {
	buf := make([]byte, 4096)
	n, err := unix.Fgetxattr(fd, name, buf)
	if err != nil || n <= 0 {
		return ""
	}
	return string(buf[:n])
}

// resolveLower finds each directory's path in the workspace before the run
// (see upperEntry.lower): parentLower is its parent's, if it has one.
func (e *upperEntry) resolveLower(parentLower string, parentHas bool) error {
	for _, c := range e.children {
		if c.st.Mode&unix.S_IFMT != unix.S_IFDIR {
			continue
		}
		switch r := c.redirect; {
		case c.opaque:
		case strings.HasPrefix(r, "/"):
			p, err := cleanRedirect(r[1:], true)
			if err != nil {
				return err
			}
			c.lower, c.hasLower, c.renamed = p, true, true
		case r != "" && parentHas:
			p, err := cleanRedirect(r, false)
			if err != nil {
				return err
			}
			c.lower, c.hasLower, c.renamed = path.Join(parentLower, p), true, true
		case r == "" && parentHas:
			c.lower, c.hasLower = path.Join(parentLower, c.name), true
		}
		if err := c.resolveLower(c.lower, c.hasLower); err != nil {
			return err
		}
	}
	return nil
}

// cleanRedirect checks a redirect: names separated by slashes (one name
// when relative), none empty, "." or "..".
func cleanRedirect(r string, abs bool) (string, error) {
	parts := strings.Split(r, "/")
	if r == "" || (!abs && len(parts) > 1) {
		return "", fmt.Errorf("bad redirect %q in the upper layer", r)
	}
	for _, p := range parts {
		if p == "" || p == "." || p == ".." || strings.IndexByte(p, 0) >= 0 {
			return "", fmt.Errorf("bad redirect %q in the upper layer", r)
		}
	}
	return r, nil
}
