package workspace

import (
	"fmt"
	"io/fs"
	"os"
)

// Usage is what a workspace holds: its entries of every kind (files,
// directories, links, anything else) and the total size of its regular
// files. Quotas are checked against it.
type Usage struct {
	Entries int
	Bytes   int64
	// Over says the walk stopped after more than the entries it was
	// allowed; Bytes then counts only what it saw.
	Over bool
}

// Usage walks the workspace without following links, stopping once it has
// seen more than maxEntries entries. A directory on which another file
// system is mounted counts as one entry: what it holds is not the
// workspace's.
func (w *Workspace) Usage(maxEntries int) (Usage, error) {
	root, err := os.OpenRoot(w.Dir)
	if err != nil {
		return Usage{}, fmt.Errorf("workspace: %w", err)
	}
	defer root.Close()
	mounts, err := newMountGuard(root)
	if err != nil {
		return Usage{}, fmt.Errorf("workspace: %w", err)
	}
	var u Usage
	err = fs.WalkDir(root.FS(), ".", func(rel string, d fs.DirEntry, err error) error {
		if err != nil {
			if rel == "." {
				return err
			}
			return nil // unreadable: it cannot grow through the API either
		}
		if rel == "." {
			return nil
		}
		if u.Entries++; u.Entries > maxEntries {
			u.Over = true
			return fs.SkipAll
		}
		if d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil { // lstat
				u.Bytes += fi.Size()
			}
		}
		if d.IsDir() {
			if other, err := mounts.elsewhere(rel, d); err != nil || other {
				return fs.SkipDir
			}
		}
		return nil
	})
	if err != nil {
		return Usage{}, fmt.Errorf("workspace: %w", err)
	}
	return u, nil
}
