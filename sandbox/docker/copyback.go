package docker

import (
	"io/fs"
	"os"
	"path"
	"syscall"

	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/sandbox/internal/backendkit"
	"github.com/codeagent/codeagent/sandbox/internal/diskwatch"
)

// budget bounds what the copy back adds to the workspace: its growth, as
// the disk watcher charges it (allocated blocks, a file at most its size,
// InodeCost and the directory entry per new entry), may not pass limit.
// Entries that do not fit are left in the staging directory, and counted.
type budget struct {
	limit   int64
	used    int64
	skipped int
}

// admit reports whether the staged entry rel, described by fi, fits, and
// charges it: what it will take in the workspace less what the entry it
// replaces took there.
func (b *budget) admit(wr *os.Root, rel string, fi fs.FileInfo) bool {
	if b == nil {
		return true
	}
	need := allocation(fi)
	if fi.IsDir() && need == 0 {
		need = 4096
	}
	var old int64
	if cur, err := wr.Lstat(rel); err == nil {
		if cur.Mode().Type() == fi.Mode().Type() && fi.IsDir() {
			return true // an existing directory takes nothing more
		}
		old = allocation(cur)
	} else {
		need += diskwatch.InodeCost + int64(len(path.Base(rel))) + 12
	}
	if b.used+need-old > b.limit {
		b.skipped++
		return false
	}
	b.used += need - old
	return true
}

// allocation is an entry's blocks, for a regular file at most its size
// rounded up to a block: space allocated beyond the size (fallocate with
// FALLOC_FL_KEEP_SIZE) is not copied.
func allocation(fi fs.FileInfo) int64 {
	var n int64
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		n = int64(st.Blocks) * 512
	}
	if fi.Mode().IsRegular() {
		n = min(n, (fi.Size()+4095)&^4095)
		if n == 0 && fi.Size() > 0 && fi.Sys() == nil {
			n = fi.Size()
		}
	}
	return n
}

// note tells in res that entries were left behind for the disk limit.
func (b *budget) note(res *sandbox.Result, lim sandbox.Limits) {
	if b != nil {
		backendkit.NoteLeftBehind(res, lim, b.skipped)
	}
}
