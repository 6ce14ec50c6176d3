//go:build linux && (amd64 || arm64)

package namespace

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/codeagent/codeagent/sandbox"
)

// The benchmarks compare the sandbox with the bare process in the same run,
// interleaved, so that machine noise hits both alike. Run them with
//
//	go test ./sandbox/namespace -run XXX -bench . -benchtime 200x
//
// and see docs/BENCHMARKS.md.

var pythonPass = []string{"python3", "-c", "pass"}

func runBare(b testing.TB) {
	if err := exec.Command("/usr/bin/python3", "-c", "pass").Run(); err != nil {
		b.Fatal(err)
	}
}

func runSandboxed(b testing.TB, sb *Backend, ws string) {
	res, err := sb.Run(context.Background(), sandbox.Spec{Command: pythonPass, Workspace: ws})
	if err != nil || res.Status != sandbox.StatusOK {
		b.Fatalf("sandbox: %v %s %s", err, res.Status, res.Stderr)
	}
}

func median(d []time.Duration) time.Duration {
	slices.Sort(d)
	return d[len(d)/2]
}

// BenchmarkOverhead reports the median time of `python3 -c pass` bare and in
// a fresh sandbox, and the difference.
func BenchmarkOverhead(b *testing.B) { benchOverhead(b, newTestBackend(b)) }

// BenchmarkOverheadWarm keeps two sandboxes started ahead, already in their
// cgroups, as the agent and the server do. Like BenchmarkOverhead it lets the
// backend's background work (cleanup, refill) finish between iterations, as
// the seconds between an agent's executions do, so that it does not land on
// either measurement.
func BenchmarkOverheadWarm(b *testing.B) {
	sb, err := New(Config{Warm: 2})
	if err != nil {
		b.Fatal(err)
	}
	defer sb.Close()
	benchOverhead(b, sb)
}

// BenchmarkOverheadWarmOverlay compares, interleaved in one run, warm
// executions on an overlay workspace (the default as root) with warm
// executions on the workspace bound itself (Config.PlainWorkspace, as
// before overlays): the cost of the overlay's mount, the upper layer's
// preparation at run time and an empty merge.
func BenchmarkOverheadWarmOverlay(b *testing.B) { benchOverlay(b, 2) }

// BenchmarkOverheadOverlay is the same cold: each execution also makes
// its upper file system (mke2fs, a loop device, a mount).
func BenchmarkOverheadOverlay(b *testing.B) { benchOverlay(b, 0) }

func benchOverlay(b *testing.B, warm int) {
	over, err := New(Config{Warm: warm})
	if err != nil {
		b.Fatal(err)
	}
	defer over.Close()
	if over.ReactiveDisk() {
		b.Skip("no overlay workspaces here")
	}
	plain, err := New(Config{Warm: warm, PlainWorkspace: true})
	if err != nil {
		b.Fatal(err)
	}
	defer plain.Close()
	tOver, tPlain := benchInterleaved(b, over, plain)
	mo, mp := median(tOver), median(tPlain)
	b.ReportMetric(float64(mo.Microseconds())/1000, "overlay-median-ms")
	b.ReportMetric(float64(mp.Microseconds())/1000, "plain-median-ms")
	b.ReportMetric(float64((mo-mp).Microseconds())/1000, "overlay-cost-ms")
}

// BenchmarkOverheadPidNS compares, interleaved in one run, executions
// whose launcher is the first process of a PID namespace of its own (as
// root, so that the sandbox dies with it at every stage) with launchers
// without one: its cost, warm (two started ahead) and cold.
func BenchmarkOverheadPidNS(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("launchers have a PID namespace of their own only as root")
	}
	for _, warm := range []int{2, 0} {
		b.Run("warm"+strconv.Itoa(warm), func(b *testing.B) {
			own, err := New(Config{Warm: warm})
			if err != nil {
				b.Fatal(err)
			}
			defer own.Close()
			without, err := New(Config{Warm: warm})
			if err != nil {
				b.Fatal(err)
			}
			defer without.Close()
			without.noPidNS = true
			tOwn, tWithout := benchInterleaved(b, own, without)
			mo, mw := median(tOwn), median(tWithout)
			b.ReportMetric(float64(mo.Microseconds())/1000, "pidns-median-ms")
			b.ReportMetric(float64(mw.Microseconds())/1000, "without-median-ms")
			b.ReportMetric(float64((mo-mw).Microseconds())/1000, "pidns-cost-ms")
		})
	}
}

// benchInterleaved runs b.N executions on each of x and y, alternating
// which goes first (ABBA), each after its backend's background work, and
// returns their times.
func benchInterleaved(b *testing.B, x, y *Backend) (tx, ty []time.Duration) {
	ws := b.TempDir()
	b.ResetTimer()
	for i := range b.N {
		first, second := x, y
		if i%2 == 1 {
			first, second = y, x
		}
		for _, sb := range []*Backend{first, second} {
			sb.quiesce()
			t0 := time.Now()
			runSandboxed(b, sb, ws)
			if sb == x {
				tx = append(tx, time.Since(t0))
			} else {
				ty = append(ty, time.Since(t0))
			}
		}
	}
	return tx, ty
}

// BenchmarkOverheadWithoutCgroup is the same with rlimits only, to show what
// the cgroup costs on this host.
func BenchmarkOverheadWithoutCgroup(b *testing.B) {
	sb := newTestBackend(b)
	sb.cgroups = nil
	benchOverhead(b, sb)
}

func benchOverhead(b *testing.B, sb *Backend) {
	ws := b.TempDir()
	var bare, boxed []time.Duration
	b.ResetTimer()
	for range b.N {
		sb.quiesce()
		t0 := time.Now()
		runBare(b)
		t1 := time.Now()
		runSandboxed(b, sb, ws)
		bare = append(bare, t1.Sub(t0))
		boxed = append(boxed, time.Since(t1))
	}
	mb, ms := median(bare), median(boxed)
	b.ReportMetric(float64(mb.Microseconds())/1000, "bare-median-ms")
	b.ReportMetric(float64(ms.Microseconds())/1000, "sandbox-median-ms")
	b.ReportMetric(float64((ms-mb).Microseconds())/1000, "overhead-ms")
}

// BenchmarkThroughput2 reports executions per second with two in parallel,
// bare and sandboxed, in alternating rounds, and their ratio.
func BenchmarkThroughput2(b *testing.B) {
	sb, err := New(Config{Warm: 2})
	if err != nil {
		b.Fatal(err)
	}
	defer sb.Close()
	benchThroughput(b, sb)
}

// BenchmarkThroughput2WithoutCgroup is the same with rlimits only.
func BenchmarkThroughput2WithoutCgroup(b *testing.B) {
	sb := newTestBackend(b)
	sb.cgroups = nil
	benchThroughput(b, sb)
}

func benchThroughput(b *testing.B, sb *Backend) {
	ws := [2]string{b.TempDir(), b.TempDir()}
	round := func(n int, fn func(worker int)) time.Duration {
		start := time.Now()
		var wg sync.WaitGroup
		for w := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < n; i += 2 {
					fn(w)
				}
			}()
		}
		wg.Wait()
		return time.Since(start)
	}
	const perRound = 20
	var bareT, boxT time.Duration
	var count int
	b.ResetTimer()
	for count < b.N {
		bareT += round(perRound, func(int) { runBare(b) })
		boxT += round(perRound, func(w int) { runSandboxed(b, sb, ws[w]) })
		count += perRound
	}
	bareRate := float64(count) / bareT.Seconds()
	boxRate := float64(count) / boxT.Seconds()
	b.ReportMetric(bareRate, "bare-exec/s")
	b.ReportMetric(boxRate, "sandbox-exec/s")
	b.ReportMetric(boxRate/bareRate, "ratio")
}

// quiesce waits until the backend's background work is done.
func (b *Backend) quiesce() { b.bg.Wait() }
