package deps_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/codeagent/codeagent/deps"
	"github.com/codeagent/codeagent/internal/pyindex"
)

// emptyDirs is a project whose wheel makes n directories, in chains of
// ten ending in one empty file (pip makes no directory that holds
// nothing): next to no bytes of files, n directories' blocks and n+n/10
// inodes on disk.
func emptyDirs(t *testing.T, n int) pyindex.Dist {
	files := make(map[string]string, n/10)
	for i := range n / 10 {
		files[fmt.Sprintf("hollow/d%04d/a/b/c/d/e/f/g/h/i/x", i)] = ""
	}
	return dist(t, "hollow", "1.0", files)
}

// du is what the tree below dir takes on disk as du counts it: the
// blocks allocated to each file, directory and link, links not followed.
func du(t *testing.T, dir string) (blocks int64, entries int) {
	t.Helper()
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		blocks += fi.Sys().(*syscall.Stat_t).Blocks * 512
		entries++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return blocks, entries
}

// An environment of many empty directories counts what it takes on disk
// (not the bytes of its files, next to none), and eviction bounds the
// store by that: a client installing such packages cannot grow a server's
// disk past the cap.
func TestEnvironmentCountsItsDiskUsage(t *testing.T) {
	const n = 8000
	ix := pyindex.New(t, emptyDirs(t, n),
		dist(t, "gull", "0.7", map[string]string{"gull/__init__.py": "TWO = 2\n"}))
	s := newStore(t)
	ctx := context.Background()
	hollow, err := s.Ensure(ctx, deps.Request{Python: []string{"hollow"}, IndexURL: ix.URL()})
	if err != nil {
		t.Fatal(err)
	}
	hollow.Release()
	blocks, entries := du(t, filepath.Join(hollow.Dir, "ws"))
	if blocks < n*512 || entries < n {
		t.Fatalf("the install made %d bytes of blocks in %d entries; want %d directories", blocks, entries, n)
	}
	t.Logf("%d directories: the environment counts %d bytes in %d entries; du: %d bytes of blocks", n, hollow.Size, hollow.Entries, blocks)
	if hollow.Size < blocks || hollow.Entries != int64(entries) {
		t.Errorf("the environment counts %d bytes in %d entries; du counts %d bytes of blocks in %d entries",
			hollow.Size, hollow.Entries, blocks, entries)
	}
	if envs, _ := s.List(); len(envs) != 1 || envs[0].Size != hollow.Size {
		t.Errorf("listed as %+v", envs)
	}
	// A cap above a small environment and below this one: installing the
	// small one evicts this one.
	s.MaxBytes = blocks / 2
	gull, err := s.Ensure(ctx, deps.Request{Python: []string{"gull"}, IndexURL: ix.URL()})
	if err != nil {
		t.Fatal(err)
	}
	gull.Release()
	if gull.Size >= s.MaxBytes {
		t.Fatalf("the small environment takes %d bytes, past the cap %d of the test", gull.Size, s.MaxBytes)
	}
	if envs, _ := s.List(); len(envs) != 1 || envs[0].Key != gull.Key {
		t.Errorf("after eviction: %+v, want only %s", envs, gull.Key)
	}
}

// An install that makes more files and directories than the cap per
// environment fails with that reason and leaves nothing.
func TestEnvironmentEntryCap(t *testing.T) {
	ix := pyindex.New(t, emptyDirs(t, 1000))
	s := newStore(t)
	s.MaxEntries = 1000
	failsLeavingNothing(t, s, deps.Request{Python: []string{"hollow"}, IndexURL: ix.URL()}, "more than 1000 files and directories")
	s.MaxEntries = 0 // the default cap takes it
	lease, err := s.Ensure(context.Background(), deps.Request{Python: []string{"hollow"}, IndexURL: ix.URL()})
	if err != nil {
		t.Fatal(err)
	}
	lease.Release()

	// An environment recorded before sizes counted the disk (its files'
	// bytes, no entries) is measured when next read, and recorded so.
	record := filepath.Join(lease.Dir, "env.json")
	old := strings.Replace(readFile(t, record), fmt.Sprintf(`"size": %d,`, lease.Size), `"size": 1,`, 1)
	old = strings.Replace(old, fmt.Sprintf(`"entries": %d,`, lease.Entries), "", 1)
	if err := os.WriteFile(record, []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	if envs, _ := s.List(); len(envs) != 1 || envs[0].Size != lease.Size || envs[0].Entries != lease.Entries {
		t.Errorf("an old record read as %+v, want size %d in %d entries", envs, lease.Size, lease.Entries)
	}
	if got := readFile(t, record); !strings.Contains(got, fmt.Sprintf(`"entries": %d,`, lease.Entries)) {
		t.Errorf("the old record was not rewritten:\n%s", got)
	}
}

func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// failsLeavingNothing installs req into the empty store s, which must
// fail with an install error saying want, and leave no environment and
// no staging directory.
func failsLeavingNothing(t *testing.T, s *deps.Store, req deps.Request, want string) {
	t.Helper()
	_, err := s.Ensure(context.Background(), req)
	var ie *deps.InstallError
	if !errors.As(err, &ie) || !strings.Contains(ie.Message, want) {
		t.Fatalf("got %v, want an install error saying %q", err, want)
	}
	envs, _ := s.List()
	left, _ := filepath.Glob(filepath.Join(s.Dir, ".staging-*"))
	if len(envs) != 0 || len(left) != 0 {
		t.Errorf("a failed install left %v and %v", envs, left)
	}
}
