package sandboxtest

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/codeagent/codeagent/sandbox"
)

// The disk attacks try to make the host's disk usage for a run's workspace
// grow past Limits.Disk by more than one Limits.FileSize, each in a way
// that a watcher counting only regular files, or looking only now and then,
// misses, or that only a file system of the limit's size stops. After each
// run the host is measured as du does (st_blocks of every entry, hard links
// once, not crossing into other file systems): the workspace, and for a
// backend that stages the workspace, the staging area, and for one that
// holds a run's writes elsewhere first, that scratch space, whose peaks are
// sampled during the run.
//
// The bound is Disk + FileSize where the backend enforces the limit by
// construction. Where it only reacts (Features.ReactiveDisk), the program
// writes on while the watcher's kill is under way, and the bound is the
// looser one of reactiveDiskBound, which still catches a limit not
// enforced at all (the attacks write up to 400 MiB).

// stager is implemented by backends that copy the workspace into a host
// directory of their own during a run (the Docker backend).
type stager interface{ StagingDir() string }

// scratchMeter is implemented by backends whose runs write to host disk of
// their own before their writes reach the workspace (the namespace
// backend's overlay upper layers): ScratchGrowth is how much host disk the
// runs under way have taken so far.
type scratchMeter interface{ ScratchGrowth() int64 }

// diskBound is the most a disk attack under lim may leave on the host.
func diskBound(sb sandbox.Sandbox, lim sandbox.Limits) int64 {
	if featuresOf(sb).ReactiveDisk {
		return reactiveDiskBound(lim)
	}
	return lim.Disk + lim.FileSize
}

// reactiveDiskBound is the documented bound of a reactive disk limit (see
// docs/ARCHITECTURE.md, "The disk limit"): Disk + FileSize plus what
// writers put down while the watcher's kill is under way, which on a
// loaded two-core machine TestConformanceUnprivileged measured at up to
// 78 MiB (four writers of 1 MiB files, 10-88 MiB under a limit of 10 MiB,
// in 13 runs), about a quarter of a second of writing there.
func reactiveDiskBound(lim sandbox.Limits) int64 {
	return lim.Disk + lim.FileSize + 128<<20
}

// skipReactive skips an attack that only a limit enforced by construction
// stops.
func skipReactive(t *testing.T, sb sandbox.Sandbox, why string) {
	t.Helper()
	if featuresOf(sb).ReactiveDisk {
		t.Skip("the disk limit is reactive here: " + why + " (the residual of that mode, docs/ARCHITECTURE.md)")
	}
}

func diskLimit(t *testing.T, sb sandbox.Sandbox) {
	small := sandbox.Limits{Disk: 10 << 20, FileSize: 1 << 20, WallTime: 20 * time.Second}
	mid := sandbox.Limits{Disk: 50 << 20, FileSize: 10 << 20, WallTime: 20 * time.Second}
	t.Run("Directories", func(t *testing.T) {
		// Bounded probe: 100 directories (400 KiB) fit in 10 MiB.
		diskProbe(t, sb, small, "import os\nfor i in range(100):\n    os.mkdir(f'd{i}')\nprint('done')")
		// At most 30 000 directories of 4 KiB each, 120 MiB.
		diskAttack(t, sb, small, "import os\nfor i in range(30000):\n    os.mkdir(f'd{i}')\n")
	})
	t.Run("Symlinks", func(t *testing.T) {
		code := "import os\nt = 'x' * 4000\nfor i in range(%d):\n    os.symlink(t, f'l{i}')\n"
		diskProbe(t, sb, small, strings.Replace(code, "%d", "100", 1)+"print('done')")
		diskAttack(t, sb, small, strings.Replace(code, "%d", "30000", 1))
	})
	for _, mode := range []struct{ name, flag string }{{"Fallocate", "0"}, {"FallocateKeepSize", "1"}} {
		t.Run(mode.name, func(t *testing.T) {
			// fallocate(2) itself, not glibc's posix_fallocate, which writes
			// a byte per block where the call is refused.
			code := `import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
def falloc(path, n):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    r = libc.fallocate(fd, ` + mode.flag + `, 0, n)
    e = ctypes.get_errno()
    os.close(fd)
    return r, e
`
			diskProbe(t, sb, small, code+"r, e = falloc('probe', 512 << 10)\nprint('done', r, e)")
			// One call of 200 MiB, then up to 200 calls of one FileSize each,
			// in the workspace and in /tmp: at most 400 MiB + 200 MiB. A
			// sandbox may refuse fallocate (EOPNOTSUPP) instead: then the
			// program ends well within the limit.
			diskAttackRefusable(t, sb, t.TempDir(), small, code+`
print(falloc('big', 200 << 20), flush=True)
print(falloc('/tmp/big', 200 << 20), flush=True)
for i in range(200):
    falloc(f'f{i}', 1 << 20)
`)
		})
	}
	t.Run("ManyEntriesThenWrites", func(t *testing.T) {
		// 30 000 entries in the workspace and 19 000 more from the program
		// make every walk of it slow; then 1 MiB writes, at most 200 MiB.
		ws := t.TempDir()
		for d := range 30 {
			dir := filepath.Join(ws, "host", strconv.Itoa(d))
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			for i := range 999 {
				if err := os.WriteFile(filepath.Join(dir, strconv.Itoa(i)), nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
		// The wall clock is generous: creating the entries alone took over
		// 20 s on a loaded 2-core machine (unprivileged, the watcher walking
		// the tree meanwhile), and the verdict must come from the disk limit.
		lim := mid
		lim.WallTime = 90 * time.Second
		diskAttackIn(t, sb, ws, lim, `import os
os.mkdir('e')
for d in range(19):
    os.mkdir(f'e/{d}')
    for i in range(1000):
        open(f'e/{d}/{i}', 'w').close()
print('entries', flush=True)
chunk = b'\1' * (1 << 20)
for i in range(20):
    with open(f'w{i}', 'wb') as f:
        for _ in range(10):
            f.write(chunk)
`)
	})
	t.Run("WriteUnderSmallMemory", func(t *testing.T) {
		// Disk writes are not bounded by the memory limit, as they would
		// be on a tmpfs: 80 MiB under a memory limit of 64 MiB.
		lim := sandbox.Limits{Disk: 100 << 20, Memory: 64 << 20, WallTime: 20 * time.Second}
		diskProbe(t, sb, lim, "chunk = b'\\1' * (1 << 20)\nwith open('big', 'wb') as f:\n    for _ in range(80):\n        f.write(chunk)\nprint('done')")
	})
	t.Run("SparseFiles", func(t *testing.T) {
		// Files of one FileSize each with a single byte at the end: little
		// allocation in the sandbox, 4 MiB each if copied out densely; at
		// most 60 of them, 240 MiB.
		lim := sandbox.Limits{Disk: 10 << 20, FileSize: 4 << 20, WallTime: 20 * time.Second}
		diskProbe(t, sb, lim, "with open('probe', 'wb') as f:\n    f.seek((1 << 20) - 1)\n    f.write(b'x')\nprint('done')")
		diskAttack(t, sb, lim, `for i in range(60):
    with open(f's{i}', 'wb') as f:
        f.seek((4 << 20) - 1)
        f.write(b'x')
`)
	})
	for _, tc := range []struct {
		name string
		lim  sandbox.Limits
	}{{"ParallelWriters", small}, {"ParallelWritersMid", mid}} {
		t.Run(tc.name, func(t *testing.T) {
			// Four processes writing new files of one FileSize each as fast
			// as they can, at most 100 files each.
			diskAttack(t, sb, tc.lim, `import os
fs = `+strconv.FormatInt(tc.lim.FileSize, 10)+`
chunk = b'\1' * min(fs, 1 << 20)
for w in range(4):
    if os.fork() == 0:
        for i in range(100):
            with open(f'p{w}_{i}', 'wb') as f:
                for _ in range(fs // len(chunk)):
                    f.write(chunk)
        os._exit(0)
for w in range(4):
    os.wait()
`)
		})
	}
	t.Run("ParallelBigWrites", func(t *testing.T) {
		// Eight processes open a file each, wait until all have, and then
		// each writes one FileSize of 32 MiB in a single write(2), which
		// takes longer than a time slice: a watcher learns of a write
		// only when it is done (or when its periodic walk comes by), and
		// by then the others are well under way, so a reactive limit ends
		// up several file sizes past the disk limit; at most 256 MiB.
		skipReactive(t, sb, "a write under way is seen only once it is done")
		lim := sandbox.Limits{Disk: 10 << 20, FileSize: 32 << 20, Memory: 512 << 20, WallTime: 20 * time.Second}
		diskAttack(t, sb, lim, `import os, time
buf = b'\1' * `+strconv.FormatInt(lim.FileSize, 10)+`
r, w = os.pipe()
for i in range(8):
    if os.fork() == 0:
        os.close(w)
        fd = os.open(f'big{i}', os.O_WRONLY | os.O_CREAT, 0o644)
        os.read(r, 1)
        try:
            os.write(fd, buf)
        except OSError:
            pass
        os._exit(0)
time.sleep(0.01)
os.close(r)
os.close(w)
for i in range(8):
    os.wait()
`)
	})
	t.Run("UnlinkedOpenFiles", func(t *testing.T) {
		// Files unlinked while open have no name for a watcher to find, and
		// take the host's disk until the program ends: up to 200 of one
		// FileSize each, 200 MiB. The program counts what write(2) accepted.
		skipReactive(t, sb, "a file without a name takes disk that no watcher sees")
		ws := t.TempDir()
		var res sandbox.Result
		grew, peaks := measureDisk(t, sb, ws, func() {
			res = execute(t, sb, program{lang: "python", ws: ws, limits: small, code: `
import os
chunk = b'\1' * (1 << 20)
fds, total = [], 0
try:
    for i in range(200):
        fd = os.open(f'u{i}', os.O_WRONLY | os.O_CREAT, 0o644)
        os.unlink(f'u{i}')
        fds.append(fd)
        total += os.write(fd, chunk)
except OSError as e:
    print('errno', e.errno)
print('accepted', total)
`})
		})
		_, after, _ := strings.Cut(string(res.Stdout), "accepted ")
		accepted, err := strconv.ParseInt(strings.TrimSpace(after), 10, 64)
		if err != nil {
			t.Fatalf("no count of accepted bytes: %s %s %s", res.Status, res.Stdout, res.Stderr)
		}
		bound := diskBound(sb, small)
		t.Logf("write(2) accepted %.1f MiB into unlinked files (bound %s); %s", mib(accepted), sandbox.FormatSize(bound), strings.TrimSpace(string(res.Stdout)))
		if accepted > bound {
			t.Errorf("the host took %.1f MiB of unlinked files, more than the disk limit plus one file size (%s)", mib(accepted), sandbox.FormatSize(bound))
		}
		checkDisk(t, grew, peaks, bound)
	})
	t.Run("Tmp", func(t *testing.T) {
		// /tmp is a tmpfs of Disk bytes: 100 MiB do not fit in 10 MiB.
		res := execute(t, sb, program{lang: "python", limits: small, code: `
n = 0
try:
    for i in range(100):
        with open(f'/tmp/t{i}', 'wb') as f:
            f.write(b'\2' * (1 << 20))
        n += 1
except OSError as e:
    print('errno', e.errno)
print('wrote', n)
`})
		if !strings.Contains(string(res.Stdout), "errno") || strings.Contains(string(res.Stdout), "wrote 100") {
			t.Fatalf("/tmp took 100 MiB under a 10 MiB limit: %s %s", res.Stdout, res.Stderr)
		}
	})
}

// diskProbe runs code, which stays within lim, and wants it to succeed:
// the limit is not enforced by refusing everything.
func diskProbe(t *testing.T, sb sandbox.Sandbox, lim sandbox.Limits, code string) {
	t.Helper()
	res := execute(t, sb, program{lang: "python", limits: lim, code: code})
	wantStatus(t, res, sandbox.StatusOK)
	if !strings.Contains(string(res.Stdout), "done") {
		t.Fatalf("probe did not finish: %s %s", res.Stdout, res.Stderr)
	}
}

// diskAttack runs code in a fresh workspace and checks that neither the
// workspace nor the staging area grew by more than Disk + FileSize, that the
// verdict names the disk limit and that no process is left.
func diskAttack(t *testing.T, sb sandbox.Sandbox, lim sandbox.Limits, code string) {
	t.Helper()
	diskAttackIn(t, sb, t.TempDir(), lim, code)
}

// diskAttackIn is diskAttack in the workspace ws.
func diskAttackIn(t *testing.T, sb sandbox.Sandbox, ws string, lim sandbox.Limits, code string) {
	t.Helper()
	diskAttackRefusable(t, sb, ws, lim, code+"\nimport sys\nsys.exit(3)\n")
}

// diskAttackRefusable is diskAttackIn for attacks a sandbox may refuse
// outright: a program that ends by itself with status ok and left the
// workspace within the limit is contained too. Other attacks end with
// exit status 3 when the limit did not stop them.
func diskAttackRefusable(t *testing.T, sb sandbox.Sandbox, ws string, lim sandbox.Limits, code string) {
	t.Helper()
	mark := marker()
	var res sandbox.Result
	grew, peaks := measureDisk(t, sb, ws, func() {
		res = execute(t, sb, program{lang: "python", ws: ws, mark: mark, limits: lim, code: code})
	})
	assertNoProcesses(t, mark)
	bound := diskBound(sb, lim)
	t.Logf("workspace grew %.1f MiB under a limit of %s (bound %s); %s: %s", mib(grew), sandbox.FormatSize(lim.Disk), sandbox.FormatSize(bound), res.Status, res.Message)
	checkDisk(t, grew, peaks, bound)
	refused := res.Status == sandbox.StatusOK && grew <= lim.Disk
	if !refused && (res.Status != sandbox.StatusSignaled || !strings.Contains(res.Message, "disk limit")) {
		t.Errorf("verdict %s %q does not name the disk limit\nstdout: %.500s\nstderr: %.500s", res.Status, res.Message, res.Stdout, res.Stderr)
	}
}

// diskPeaks are the largest growths of a backend's own host disk during a
// run: the staging area, less the workspace's copy, and the scratch space;
// -1 where the backend has none.
type diskPeaks struct{ staging, scratch int64 }

// measureDisk runs run, a run in workspace ws, and returns how much ws grew
// and the peaks sampled meanwhile.
func measureDisk(t *testing.T, sb sandbox.Sandbox, ws string, run func()) (int64, diskPeaks) {
	t.Helper()
	before, nBefore := duX(ws), entries(ws)
	peaks := diskPeaks{-1, -1}
	var staging *peakSampler
	if s, ok := backendOf(sb).(stager); ok {
		staging = samplePeak(s.StagingDir())
	}
	var scratch *scratchSampler
	if m, ok := backendOf(sb).(scratchMeter); ok && !featuresOf(sb).ReactiveDisk {
		scratch = sampleScratch(m)
	}
	run()
	if staging != nil {
		// The copy of the workspace in the staging area is the backend's,
		// not the program's: its blocks and an inode (256 bytes) per entry.
		peaks.staging = staging.stop() - before - 256*int64(nBefore)
	}
	if scratch != nil {
		peaks.scratch = scratch.stop()
	}
	return duX(ws) - before, peaks
}

// checkDisk fails the test if the workspace or a peak passed bound.
func checkDisk(t *testing.T, grew int64, peaks diskPeaks, bound int64) {
	t.Helper()
	if grew > bound {
		t.Errorf("the workspace grew by %.1f MiB, more than the bound (%s)", mib(grew), sandbox.FormatSize(bound))
	}
	for _, p := range []struct {
		what string
		n    int64
	}{{"staging area", peaks.staging}, {"scratch space", peaks.scratch}} {
		if p.n < 0 {
			continue
		}
		t.Logf("%s grew %.1f MiB at its peak", p.what, mib(p.n))
		if p.n > bound {
			t.Errorf("the %s grew by %.1f MiB, more than the bound (%s)", p.what, mib(p.n), sandbox.FormatSize(bound))
		}
	}
}

// duX is what du -sx reports, in bytes: the blocks of every entry below dir
// on dir's file system, hard links counted once.
func duX(dir string) int64 {
	root, err := os.Lstat(dir)
	if err != nil {
		return 0
	}
	dev := root.Sys().(*syscall.Stat_t).Dev
	seen := map[uint64]bool{}
	var n int64
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || p == dir {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		st := fi.Sys().(*syscall.Stat_t)
		if st.Dev != dev {
			return filepath.SkipDir // a file system mounted here is measured by its image
		}
		if st.Nlink > 1 && !fi.IsDir() {
			if seen[st.Ino] {
				return nil
			}
			seen[st.Ino] = true
		}
		n += st.Blocks * 512
		return nil
	})
	return n
}

// entries counts the entries below dir.
func entries(dir string) int {
	n := -1
	_ = filepath.WalkDir(dir, func(string, os.DirEntry, error) error { n++; return nil })
	return n
}

// peakSampler measures each subdirectory of a staging area until stopped
// and keeps the largest growth of any one since it was first seen.
type peakSampler struct {
	stopc chan struct{}
	done  chan struct{}
	mu    sync.Mutex
	peak  int64
}

func samplePeak(dir string) *peakSampler {
	p := &peakSampler{stopc: make(chan struct{}), done: make(chan struct{})}
	first := map[string]int64{}
	sample := func() {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			sub := filepath.Join(dir, e.Name())
			n := duX(sub)
			f, ok := first[sub]
			if !ok {
				first[sub] = n
				continue
			}
			p.mu.Lock()
			p.peak = max(p.peak, n-f)
			p.mu.Unlock()
		}
	}
	sample()
	go func() {
		defer close(p.done)
		for {
			select {
			case <-p.stopc:
				sample()
				return
			case <-time.After(5 * time.Millisecond):
				sample()
			}
		}
	}()
	return p
}

func (p *peakSampler) stop() int64 {
	close(p.stopc)
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.peak
}

// scratchSampler keeps the largest ScratchGrowth seen until stopped.
type scratchSampler struct {
	stopc chan struct{}
	done  chan struct{}
	peak  int64
}

func sampleScratch(m scratchMeter) *scratchSampler {
	s := &scratchSampler{stopc: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for {
			s.peak = max(s.peak, m.ScratchGrowth())
			select {
			case <-s.stopc:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	return s
}

func (s *scratchSampler) stop() int64 {
	close(s.stopc)
	<-s.done
	return s.peak
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }
