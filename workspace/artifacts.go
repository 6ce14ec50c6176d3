package workspace

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"syscall"

	"github.com/codeagent/codeagent/sandbox"
)

// Limits bound walking a workspace and collecting its artifacts. Zero
// fields take the defaults of DefaultLimits.
type Limits struct {
	// MaxEntries bounds the entries a snapshot walks.
	MaxEntries int
	// MaxFiles bounds the artifacts listed.
	MaxFiles int
	// MaxTotal bounds the total size of the artifacts listed and copied.
	MaxTotal int64
}

// DefaultLimits: 20 000 entries walked, 200 artifacts, 100 MiB in total.
func DefaultLimits() Limits {
	return Limits{MaxEntries: 20000, MaxFiles: 200, MaxTotal: 100 << 20}
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	if l.MaxEntries <= 0 {
		l.MaxEntries = d.MaxEntries
	}
	if l.MaxFiles <= 0 {
		l.MaxFiles = d.MaxFiles
	}
	if l.MaxTotal <= 0 {
		l.MaxTotal = d.MaxTotal
	}
	return l
}

// FileState is what a snapshot remembers of one regular file.
type FileState struct {
	Size    int64
	ModTime int64 // nanoseconds
	Mode    fs.FileMode
}

// Snapshot maps slash-separated relative paths of regular files to their
// state. Symbolic links, devices, FIFOs and sockets are never in it.
type Snapshot struct {
	Files map[string]FileState
	// Skipped lists entries that are not regular files, and Truncated says
	// the walk stopped at MaxEntries.
	Skipped   []Skipped
	Truncated bool
}

// Artifact is a file that a program created or changed.
type Artifact struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	Change string `json:"change"` // "new" or "changed"
	// Dest, when set, is the path CopyOut gives the file in the output
	// directory instead of Path (the program, .codeagent/solution.py,
	// goes out as solution.py).
	Dest string `json:"-"`
}

// Skipped is an entry left out of the artifacts, with the reason.
type Skipped struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// noise are directories that interpreters and test runners leave behind.
var noise = map[string]bool{"__pycache__": true, ".pytest_cache": true, "node_modules": true}

// Snapshot walks the workspace without following symbolic links, and
// without descending into another file system mounted below it (such a
// directory is in Skipped). Noise, codeagent's own directory (lang.OwnDir:
// the program, its tests) and the build cache (lang.CacheDir) are left
// out: no listing, artifact or change shows them.
func (w *Workspace) Snapshot(lim Limits) (Snapshot, error) {
	lim = lim.withDefaults()
	root, err := os.OpenRoot(w.Dir)
	if err != nil {
		return Snapshot{}, fmt.Errorf("workspace: %w", err)
	}
	defer root.Close()
	mounts, err := newMountGuard(root)
	if err != nil {
		return Snapshot{}, fmt.Errorf("workspace: %w", err)
	}
	s := Snapshot{Files: map[string]FileState{}}
	n := 0
	err = fs.WalkDir(root.FS(), ".", func(rel string, d fs.DirEntry, err error) error {
		if err != nil {
			if rel == "." {
				return err
			}
			return nil // unreadable entry: leave it out
		}
		if rel == "." {
			return nil
		}
		if n++; n > lim.MaxEntries {
			s.Truncated = true
			return fs.SkipAll
		}
		t := d.Type()
		switch {
		case t.IsDir():
			if noise[d.Name()] || isOwn(rel) {
				return fs.SkipDir
			}
			if other, err := mounts.elsewhere(rel, d); err != nil || other {
				if other {
					s.Skipped = append(s.Skipped, Skipped{rel, skippedMount})
				}
				return fs.SkipDir // or unreadable: leave it out
			}
			return nil
		case t&fs.ModeSymlink != 0:
			s.Skipped = append(s.Skipped, Skipped{rel, "symbolic link"})
			return nil
		case !t.IsRegular():
			s.Skipped = append(s.Skipped, Skipped{rel, "not a regular file (" + t.Type().String() + ")"})
			return nil
		}
		fi, err := d.Info() // lstat
		if err != nil || !fi.Mode().IsRegular() {
			return nil
		}
		s.Files[rel] = FileState{Size: fi.Size(), ModTime: fi.ModTime().UnixNano(), Mode: fi.Mode()}
		return nil
	})
	return s, err
}

// Changes snapshots the workspace again and returns the regular files that
// are new or changed since before, sorted by path, within lim (the rest is
// in skipped with the reason). exclude, when non-nil, drops paths such as
// the agent's own program file.
func (w *Workspace) Changes(before Snapshot, lim Limits, exclude func(rel string) bool) (arts []Artifact, skipped []Skipped, err error) {
	lim = lim.withDefaults()
	after, err := w.Snapshot(lim)
	if err != nil {
		return nil, nil, err
	}
	for _, sk := range after.Skipped {
		if exclude == nil || !exclude(sk.Path) {
			skipped = append(skipped, sk)
		}
	}
	if after.Truncated {
		skipped = append(skipped, Skipped{".", fmt.Sprintf("more than %d entries; the rest were not examined", lim.MaxEntries)})
	}
	paths := make([]string, 0, len(after.Files))
	for p := range after.Files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var total int64
	for _, p := range paths {
		st := after.Files[p]
		change := "new"
		if old, ok := before.Files[p]; ok {
			if old == st {
				continue
			}
			change = "changed"
		}
		if exclude != nil && exclude(p) {
			continue
		}
		switch {
		case len(arts) >= lim.MaxFiles:
			skipped = append(skipped, Skipped{p, fmt.Sprintf("more than %d artifacts", lim.MaxFiles)})
		case total+st.Size > lim.MaxTotal:
			skipped = append(skipped, Skipped{p, fmt.Sprintf("artifacts over %d bytes in total", lim.MaxTotal)})
		default:
			total += st.Size
			arts = append(arts, Artifact{Path: p, Size: st.Size, Change: change})
		}
	}
	return arts, skipped, nil
}

// CopyOut copies the artifacts into the host directory dst (created if
// missing), keeping their relative paths, and returns the paths copied.
// Sources are opened inside the workspace and must still be regular files.
// dst is resolved once, refusing a symbolic link a program could have made
// (dst may lie inside the workspace: the program can replace it with a link
// to a host directory), and everything below it is created through its
// descriptor without following any link, so an artifact never lands outside
// dst. A dst that must not receive programs' files (/etc, a home directory
// itself: see CheckWorkdir) is refused. At most maxTotal bytes are copied
// (0: the default).
func (w *Workspace) CopyOut(arts []Artifact, dst string, maxTotal int64) ([]string, error) {
	return w.copyOut(arts, dst, maxTotal, true)
}

// ErrExists is an artifact CopyOutNew did not copy: a file of its name is
// in the output directory already.
var ErrExists = errors.New("exists in the output directory: not replaced")

// CopyOutNew copies as CopyOut does, except that it never replaces a file
// already in dst: each such artifact is left out with an error wrapping
// ErrExists (the user's files are not overwritten without being told).
func (w *Workspace) CopyOutNew(arts []Artifact, dst string, maxTotal int64) ([]string, error) {
	return w.copyOut(arts, dst, maxTotal, false)
}

func (w *Workspace) copyOut(arts []Artifact, dst string, maxTotal int64, replace bool) ([]string, error) {
	if maxTotal <= 0 {
		maxTotal = DefaultLimits().MaxTotal
	}
	src, err := sandbox.OpenWorkspace(w.Dir)
	if err != nil {
		return nil, err
	}
	defer src.Close()
	if err := CheckWorkdir(dst); err != nil {
		return nil, fmt.Errorf("output directory %s: %w", dst, err)
	}
	outDir, err := MkdirAll(dst, 0o755)
	if err != nil {
		return nil, fmt.Errorf("output directory %s: %w", dst, err)
	}
	out, err := sandbox.OpenWorkspace(outDir)
	if err != nil {
		return nil, fmt.Errorf("output directory %s: %w", dst, err)
	}
	defer out.Close()
	var copied []string
	var errs []error
	left := maxTotal
	for _, a := range arts {
		dest := a.Dest
		if dest == "" {
			dest = a.Path
		}
		n, err := copyOne(src, out, a.Path, dest, left, replace)
		left -= n
		if err != nil {
			errs = append(errs, fmt.Errorf("copy %s: %w", dest, err))
			continue
		}
		copied = append(copied, dest)
	}
	return copied, errors.Join(errs...)
}

// copyOne copies rel from the directory src to dest in the directory dst.
func copyOne(src, dst *os.File, rel, dest string, left int64, replace bool) (int64, error) {
	if err := validRel(rel); err != nil {
		return 0, err
	}
	if err := validRel(dest); err != nil {
		return 0, err
	}
	in, fi, err := openRegular(src, rel)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	if fi.Size() > left {
		return 0, fmt.Errorf("over the size limit for artifacts")
	}
	if dir := path.Dir(dest); dir != "." {
		d, err := mkdirAt(dst, dir, 0o755)
		if err != nil {
			return 0, err
		}
		d.Close()
	}
	// O_NOFOLLOW refuses a link as the last component, O_NONBLOCK keeps a
	// FIFO from blocking, and the type is checked before anything is
	// truncated.
	flags := os.O_WRONLY | os.O_CREATE | syscall.O_NONBLOCK
	if !replace {
		flags |= os.O_EXCL
	}
	out, err := openBeneath(dst, dest, flags, 0o644, false)
	if !replace && errors.Is(err, os.ErrExist) {
		// Unless it is the artifact itself (the output directory is the
		// workspace), it is the user's: left as it is.
		if have, herr := openBeneath(dst, dest, os.O_RDONLY|syscall.O_NONBLOCK, 0, false); herr == nil {
			hfi, serr := have.Stat()
			have.Close()
			if serr == nil && os.SameFile(fi, hfi) {
				return fi.Size(), nil
			}
		}
		return 0, ErrExists
	}
	if err != nil {
		return 0, err
	}
	defer out.Close()
	ofi, err := out.Stat()
	switch {
	case err != nil:
		return 0, err
	case !ofi.Mode().IsRegular():
		return 0, fmt.Errorf("%s exists in the output directory and is not a regular file", dest)
	case os.SameFile(fi, ofi):
		return fi.Size(), nil // the output directory is the workspace itself
	}
	if err := out.Truncate(0); err != nil {
		return 0, err
	}
	n, err := io.Copy(out, io.LimitReader(in, left))
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return n, err
}
