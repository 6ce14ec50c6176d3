package workspace

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/codeagent/codeagent/internal/lazyre"
	"github.com/codeagent/codeagent/sandbox"
)

// Kept changes are a run's changes to a folder that were not applied when
// the run ended (no terminal to ask at, no --apply): the new contents of
// the added and modified files, and what the folder held at those paths
// when the run started, under DATA/changes/ID, until applied or removed.

// keptDir is the directory of kept changes in a data directory.
const keptDir = "changes"

// Kept is one run's kept changes.
type Kept struct {
	ID      string                `json:"id"`
	Folder  string                `json:"folder"`
	Task    string                `json:"task,omitempty"`
	Created time.Time             `json:"created"`
	Changes []Change              `json:"changes"`
	Base    map[string]FolderFile `json:"base"`
	// Files is the directory with the new contents (not stored).
	Files string `json:"-"`
}

var keptIDRE = lazyre.New(`^[0-9]{8}-[0-9]{6}-[0-9a-f]{6}$`)

// Keep stores changes the workspace w made to the folder f under a new ID
// in the data directory dataDir, which must be link-free.
func Keep(dataDir string, f *Folder, w *Workspace, task string, changes []Change) (*Kept, error) {
	var b [3]byte
	rand.Read(b[:])
	now := time.Now()
	k := &Kept{ID: now.UTC().Format("20060102-150405") + "-" + hex.EncodeToString(b[:]), Folder: f.Dir,
		Task: task, Created: now, Changes: changes, Base: map[string]FolderFile{}}
	dir, err := MkdirBeneath(dataDir, keptDir+"/"+k.ID+"/files", 0o700)
	if err != nil {
		return nil, fmt.Errorf("keep changes: %w", err)
	}
	files := &Workspace{Dir: dir}
	var arts []Artifact
	for _, c := range changes {
		if was, ok := f.Files[c.Path]; ok {
			k.Base[c.Path] = was
		}
		if c.Kind != ChangeDeleted {
			arts = append(arts, Artifact{Path: c.Path})
		}
	}
	if _, err := w.copyOut(arts, files.Dir, 1<<40, false); err != nil {
		_ = RemoveAll(filepath.Dir(dir))
		return nil, fmt.Errorf("keep changes: %w", err)
	}
	if err := k.Save(dataDir); err != nil {
		_ = RemoveAll(filepath.Dir(dir))
		return nil, err
	}
	k.Files = dir
	return k, nil
}

// Save writes k's record again, as after some of its changes were applied.
func (k *Kept) Save(dataDir string) error {
	data, err := json.MarshalIndent(k, "", "  ")
	if err == nil {
		var dir string
		if dir, err = MkdirBeneath(dataDir, keptDir+"/"+k.ID, 0o700); err == nil {
			err = (&Workspace{Dir: dir}).WriteFile("changes.json", data)
		}
	}
	if err != nil {
		return fmt.Errorf("keep changes: %w", err)
	}
	return nil
}

// ErrNoKept is an ID with no kept changes.
var ErrNoKept = errors.New("no kept changes of that ID")

// LoadKept reads the kept changes id of the data directory.
func LoadKept(dataDir, id string) (*Kept, error) {
	if !keptIDRE.MatchString(id) {
		return nil, fmt.Errorf("%q: %w", id, ErrNoKept)
	}
	d, err := sandbox.OpenWorkspace(dataDir)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	f, _, err := openRegular(d, keptDir+"/"+id+"/changes.json")
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w", id, ErrNoKept)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var k Kept
	if err := json.NewDecoder(f).Decode(&k); err != nil {
		return nil, fmt.Errorf("kept changes %s: %w", id, err)
	}
	k.ID, k.Files = id, filepath.Join(dataDir, keptDir, id, "files")
	return &k, nil
}

// ListKept lists the kept changes of the data directory, oldest first.
func ListKept(dataDir string) ([]*Kept, error) {
	entries, err := os.ReadDir(filepath.Join(dataDir, keptDir))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []*Kept
	for _, e := range entries {
		if k, err := LoadKept(dataDir, e.Name()); err == nil {
			out = append(out, k)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Created.Before(out[j].Created) })
	return out, nil
}

// RemoveKept removes the kept changes id.
func RemoveKept(dataDir, id string) error {
	if _, err := LoadKept(dataDir, id); err != nil {
		return err
	}
	return RemoveAll(filepath.Join(dataDir, keptDir, id))
}

// Dir is where k is kept in the data directory dataDir.
func (k *Kept) Dir(dataDir string) string { return filepath.Join(dataDir, keptDir, k.ID) }

// PruneKept removes the kept changes made before cutoff and returns them,
// oldest first.
func PruneKept(dataDir string, cutoff time.Time) ([]*Kept, error) {
	list, err := ListKept(dataDir)
	if err != nil {
		return nil, err
	}
	var removed []*Kept
	var errs []error
	for _, k := range list {
		if !k.Created.Before(cutoff) {
			continue
		}
		if err := RemoveAll(k.Dir(dataDir)); err != nil {
			errs = append(errs, fmt.Errorf("remove kept changes %s: %w", k.ID, err))
			continue
		}
		removed = append(removed, k)
	}
	return removed, errors.Join(errs...)
}

// Without returns k's changes but those in done, in order.
func (k *Kept) Without(done []Change) []Change {
	drop := make(map[string]bool, len(done))
	for _, c := range done {
		drop[c.Path] = true
	}
	var rest []Change
	for _, c := range k.Changes {
		if !drop[c.Path] {
			rest = append(rest, c)
		}
	}
	return rest
}
