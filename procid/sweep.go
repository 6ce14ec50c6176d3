package procid

import (
	"os"
	"path/filepath"
	"strings"
)

// Sweep removes the entries of dir named prefix+Tag+"-..." whose owner is
// dead, with remove (os.RemoveAll when nil), and returns how many it
// removed. Entries of live owners, of this process, and without a tag are
// left alone.
func Sweep(dir, prefix string, remove func(path string) error) (int, error) {
	if remove == nil {
		remove = os.RemoveAll
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		if os.IsNotExist(err) {
			return 0, nil
		}
		return 0, err
	}
	n := 0
	var first error
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), prefix) {
			continue
		}
		alive, ok := TagAlive(e.Name(), prefix)
		if !ok || alive {
			continue
		}
		if err := remove(filepath.Join(dir, e.Name())); err != nil {
			if first == nil {
				first = err
			}
			continue
		}
		n++
	}
	return n, first
}

// Prefix is prefix followed by this process's Tag and "-": the start of
// the names of what this process leaves in shared directories.
func Prefix(prefix string) string { return prefix + Self().Tag() + "-" }
