package workspace

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/codeagent/codeagent/sandbox"
)

// A folder is the user's directory a run starts in (`codeagent run` in a
// project). The run never writes to it: ScanFolder records what it holds,
// Seed gives the run's own workspace the same files, and at the end
// FolderChanges says what the run added, modified or deleted, which Apply
// brings to the folder only when the user says so, refusing any file that
// changed in the folder meanwhile.
//
// The folder's .git, and any other at any depth, is offered to programs but
// never changed: changes below it are listed as skipped, not applied; a
// change of another sensitive name (see Sensitive) is listed with the
// reason and applied only when the person names it.

// FolderLimits bound what a folder may hold to be offered to a run; a zero
// field is no bound.
type FolderLimits struct {
	MaxEntries int   // files, and directories (counted apart)
	MaxBytes   int64 // total size of the files
}

// DefaultFolderLimits: none. A folder is copied whole, however many files
// it holds; what bounds it is the room for the copy (see CheckRoom).
func DefaultFolderLimits() FolderLimits { return FolderLimits{} }

// ErrFolderTooLarge is a folder over its FolderLimits.
var ErrFolderTooLarge = errors.New("too large to offer to a run")

// FolderFile is what a folder held at one path when the run started: the
// identity of the file, so that a later change of it is seen.
type FolderFile struct {
	Size  int64       `json:"size"`
	Mode  fs.FileMode `json:"mode"`
	MTime int64       `json:"mtime_ns"`
	CTime int64       `json:"ctime_ns"`
	Ino   uint64      `json:"ino"`
	Dev   uint64      `json:"dev"`
}

// same reports whether the file is still the one recorded.
func (f FolderFile) same(st *unix.Stat_t) bool {
	return st.Mode&unix.S_IFMT == unix.S_IFREG && st.Size == f.Size && st.Ino == f.Ino &&
		uint64(st.Dev) == f.Dev && st.Mtim.Nano() == f.MTime && st.Ctim.Nano() == f.CTime
}

// Folder is a scanned folder.
type Folder struct {
	Dir   string                // absolute path
	Files map[string]FolderFile // regular files by slash-separated path
	Dirs  []string              // directories, parents first
	// Skipped are entries not offered (links, devices, other mounts).
	Skipped []Skipped
	// Bytes is the files' size; Disk what they take on disk (allocated
	// blocks: a sparse file's holes take none, nor in the copy).
	Bytes, Disk int64

	// seeded is each copy Seed made: its inode and change time, which
	// only a change of the copy moves (a program cannot set a ctime), so
	// that FolderChanges need not read an untouched file.
	seeded map[string]seedID
}

type seedID struct {
	ino   uint64
	ctime int64
}

// folderNoise are directories neither offered nor compared: the caches
// interpreters leave (see noise), which a program remakes. So are
// codeagent's own directory and build cache at the top (lang.OwnDir,
// lang.CacheDir): the run's own, never the folder's.
var folderNoise = map[string]bool{"__pycache__": true, ".pytest_cache": true}

// ScanFolder records the regular files and directories of dir without
// following any link and without entering another file system mounted
// below it. A folder over lim is an error wrapping ErrFolderTooLarge.
func ScanFolder(dir string, lim FolderLimits) (*Folder, error) {
	d, err := sandbox.OpenWorkspace(dir)
	if err != nil {
		return nil, fmt.Errorf("folder %s: %w", dir, err)
	}
	defer d.Close()
	f := &Folder{Dir: d.Name(), Files: map[string]FolderFile{}}
	var held []Skipped
	w, err := walkTree(d, func(rel string, st *unix.Stat_t) error {
		if heldBack(path.Base(rel), st.Mode&unix.S_IFMT == unix.S_IFDIR) {
			held = append(held, Skipped{rel, HeldBack})
			if st.Mode&unix.S_IFMT == unix.S_IFDIR {
				return errSkipDir
			}
			return nil
		}
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			if lim.MaxEntries > 0 && len(f.Dirs) >= lim.MaxEntries {
				return fmt.Errorf("folder %s holds more than %d directories: %w", dir, lim.MaxEntries, ErrFolderTooLarge)
			}
			f.Dirs = append(f.Dirs, rel)
			return nil
		}
		if lim.MaxEntries > 0 && len(f.Files) >= lim.MaxEntries {
			return fmt.Errorf("folder %s holds more than %d files: %w", dir, lim.MaxEntries, ErrFolderTooLarge)
		}
		f.Bytes += st.Size
		f.Disk += st.Blocks * 512
		if lim.MaxBytes > 0 && f.Bytes > lim.MaxBytes {
			return fmt.Errorf("folder %s holds more than %s: %w", dir, sandbox.FormatSize(lim.MaxBytes), ErrFolderTooLarge)
		}
		f.Files[rel] = FolderFile{Size: st.Size, Mode: fs.FileMode(st.Mode & 0o7777), MTime: st.Mtim.Nano(),
			CTime: st.Ctim.Nano(), Ino: st.Ino, Dev: uint64(st.Dev)}
		return nil
	})
	f.Skipped = append(held, w...)
	if err != nil {
		return nil, err
	}
	return f, nil
}

// HeldBack is the reason of a Skipped entry that ScanFolder held back.
const HeldBack = "held back: it may hold secrets"

// errSkipDir, from a visit of a directory, leaves it out of the walk.
var errSkipDir = errors.New("skip this directory")

// Files and directories that commonly hold credentials are held back from
// the run (the program's output goes to the model): environment files,
// private keys and the tools' credential stores. Held back, they are
// neither offered nor, since the run never had them, deleted by it.
var (
	heldBackDirs  = map[string]bool{".ssh": true, ".aws": true, ".gnupg": true, ".docker": true, ".kube": true, ".azure": true}
	heldBackFiles = map[string]bool{".netrc": true, ".npmrc": true, ".pypirc": true, ".git-credentials": true, "credentials.json": true,
		"id_rsa": true, "id_dsa": true, "id_ecdsa": true, "id_ed25519": true}
	heldBackExts = []string{".pem", ".key", ".p12", ".pfx", ".jks", ".keystore"}
)

// heldBack reports whether an entry of that name is held back.
func heldBack(name string, dir bool) bool {
	if dir {
		return heldBackDirs[name]
	}
	if heldBackFiles[name] || name == ".env" || (strings.HasPrefix(name, ".env.") && name != ".env.example" && name != ".env.sample") {
		return true
	}
	for _, ext := range heldBackExts {
		if strings.HasSuffix(name, ext) {
			return true
		}
	}
	return false
}

// walkTree visits the directories (parents first) and regular files
// beneath d, by descriptor, following no link and staying on d's mount;
// what it does not visit is returned with the reason. An error of visit
// stops the walk.
func walkTree(d *os.File, visit func(rel string, st *unix.Stat_t) error) ([]Skipped, error) {
	var skipped []Skipped
	var rootSt unix.Stat_t
	if err := unix.Fstat(int(d.Fd()), &rootSt); err != nil {
		return nil, err
	}
	var walk func(fd int, prefix string) error
	walk = func(fd int, prefix string) error {
		dir := os.NewFile(uintptr(fd), prefix)
		defer dir.Close()
		names, err := dir.Readdirnames(-1)
		if err != nil {
			skipped = append(skipped, Skipped{strings.TrimSuffix(prefix, "/"), "unreadable: " + err.Error()})
			return nil
		}
		sort.Strings(names)
		for _, name := range names {
			rel := prefix + name
			var st unix.Stat_t
			if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				continue // gone meanwhile
			}
			switch st.Mode & unix.S_IFMT {
			case unix.S_IFREG:
				if err := visit(rel, &st); err != nil {
					return err
				}
			case unix.S_IFDIR:
				if folderNoise[name] || isOwn(rel) {
					continue
				}
				if st.Dev != rootSt.Dev {
					skipped = append(skipped, Skipped{rel, skippedMount})
					continue
				}
				if err := visit(rel, &st); errors.Is(err, errSkipDir) {
					continue
				} else if err != nil {
					return err
				}
				sub, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
				if err != nil {
					skipped = append(skipped, Skipped{rel, "unreadable: " + err.Error()})
					continue
				}
				if err := walk(sub, rel+"/"); err != nil {
					return err
				}
			case unix.S_IFLNK:
				skipped = append(skipped, Skipped{rel, "symbolic link"})
			default:
				skipped = append(skipped, Skipped{rel, "not a regular file"})
			}
		}
		return nil
	}
	fd, err := unix.Openat(int(d.Fd()), ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	return skipped, walk(fd, "")
}

// Change is one difference between the workspace after a run and the
// folder it started from.
type Change struct {
	Path string `json:"path"`
	Kind string `json:"kind"` // "added", "modified" or "deleted"
	Size int64  `json:"size"` // the new size; the old one for deleted
	// Sensitive says why Apply refuses the change unless the person names
	// it (--apply-sensitive), "" for most; Apply decides again by name.
	Sensitive string `json:"sensitive,omitempty"`
}

// The kinds of Change.
const (
	ChangeAdded    = "added"
	ChangeModified = "modified"
	ChangeDeleted  = "deleted"
)

// isGit reports whether rel is git's metadata at any depth, which runs
// never change (see Sensitive).
func isGit(rel string) bool {
	_, never := Sensitive(rel)
	return never
}

// ignoredByRules is the reason a change to an ignored path is skipped.
const ignoredByRules = "ignored by the folder's .gitignore: not offered"

// gitReadOnly is the reason a change below .git is skipped.
const gitReadOnly = "git's files (.git) are read-only to runs: never applied"

// change is the Change of kind at rel, marked when its name is sensitive.
func change(rel, kind string, size int64) Change {
	why, _ := Sensitive(rel)
	return Change{Path: rel, Kind: kind, Size: size, Sensitive: why}
}

// FolderChanges compares the workspace w, seeded from f, with what f held
// when it was scanned: files added, modified (contents differ) and deleted,
// sorted by path. Changes below .git (at any depth), to what the folder's
// ignore rules ignore (see Ignorer), links and special files the program
// made are in skipped, never in the changes. At most the folder's entries
// and lim.MaxEntries more are walked in w.
func (f *Folder) FolderChanges(w *Workspace, lim Limits) (changes []Change, skipped []Skipped, err error) {
	lim = lim.withDefaults()
	ws, err := sandbox.OpenWorkspace(w.Dir)
	if err != nil {
		return nil, nil, fmt.Errorf("workspace: %w", err)
	}
	defer ws.Close()
	src, err := sandbox.OpenWorkspace(f.Dir)
	if err != nil {
		return nil, nil, fmt.Errorf("folder: %w", err)
	}
	defer src.Close()
	seen := map[string]bool{}
	n, most := 0, len(f.Files)+len(f.Dirs)+lim.MaxEntries
	ig := NewIgnorer(src)
	wskipped, err := walkTree(ws, func(rel string, st *unix.Stat_t) error {
		if n++; n > most {
			return fmt.Errorf("the workspace holds more than %d entries: changes not listed", most)
		}
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			return nil
		}
		seen[rel] = true
		old, had := f.Files[rel]
		kind := ChangeAdded
		if id, ok := f.seeded[rel]; ok && id.ino == st.Ino && id.ctime == st.Ctim.Nano() {
			return nil // the copy Seed made, untouched
		}
		if had {
			same, err := sameContents(ws, src, rel, st.Size, old.Size)
			if err != nil {
				return fmt.Errorf("compare %s: %w", rel, err)
			}
			if same {
				return nil
			}
			kind = ChangeModified
		}
		if isGit(rel) {
			skipped = append(skipped, Skipped{rel, gitReadOnly})
			return nil
		}
		if ig.Ignored(rel, false) {
			skipped = append(skipped, Skipped{rel, ignoredByRules})
			return nil
		}
		changes = append(changes, change(rel, kind, st.Size))
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	// A file of the folder that the run replaced by a link or a special
	// file is neither replaced nor deleted: that change is not applied.
	for _, s := range wskipped {
		if _, had := f.Files[s.Path]; had {
			seen[s.Path] = true
			s.Reason += " where the folder has a file: not applied"
		}
		skipped = append(skipped, s)
	}
	for _, rel := range f.paths() {
		if seen[rel] {
			continue
		}
		if isGit(rel) {
			skipped = append(skipped, Skipped{rel, gitReadOnly})
			continue
		}
		if ig.Ignored(rel, false) {
			skipped = append(skipped, Skipped{rel, ignoredByRules})
			continue
		}
		changes = append(changes, change(rel, ChangeDeleted, f.Files[rel].Size))
	}
	sort.Slice(changes, func(i, j int) bool { return changes[i].Path < changes[j].Path })
	return changes, skipped, nil
}

// sameContents compares rel in the directories a and b byte by byte.
func sameContents(a, b *os.File, rel string, sizeA, sizeB int64) (bool, error) {
	if sizeA != sizeB {
		return false, nil
	}
	fa, _, err := openRegular(a, rel)
	if err != nil {
		return false, err
	}
	defer fa.Close()
	fb, _, err := openRegular(b, rel)
	if err != nil {
		return false, err
	}
	defer fb.Close()
	return equalReaders(fa, fb)
}

func equalReaders(a, b io.Reader) (bool, error) {
	ba, bb := make([]byte, 64<<10), make([]byte, 64<<10)
	for {
		na, ea := io.ReadFull(a, ba)
		nb, eb := io.ReadFull(b, bb)
		if na != nb || string(ba[:na]) != string(bb[:nb]) {
			return false, nil
		}
		if ea == io.EOF || ea == io.ErrUnexpectedEOF {
			return eb == io.EOF || eb == io.ErrUnexpectedEOF, nil
		}
		if ea != nil {
			return false, ea
		}
		if eb != nil {
			return false, eb
		}
	}
}

// dirOf is the parent of rel, "" at the top.
func dirOf(rel string) string {
	if d := path.Dir(rel); d != "." {
		return d
	}
	return ""
}
