package kubernetes

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/codeagent/codeagent/sandbox"
)

// The benchmarks measure latency, not throughput: before each iteration
// (timer stopped) the pool is given time to hold its Pods again, so that
// every claim is a warm one. They report the median and the 90th
// percentile besides the mean. Run them with -benchtime Nx
// (docs/BENCHMARKS.md).

var passSpec = sandbox.Spec{Command: []string{"python3", "-c", "pass"}}

// BenchmarkClaim is the claim of an armed Pod from the warm pool, without
// a run.
func BenchmarkClaim(b *testing.B) {
	bk := newTestBackend(b, testConfig(b, 2))
	defer bk.Close()
	c := classOf(sandbox.DefaultLimits())
	lat := latencies(b, bk, func() {
		bx, err := bk.pool.take(context.Background(), c)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		bk.pool.release(bx)
	})
	report(b, lat)
}

// BenchmarkPooledRun is Run of `python3 -c pass` in a Pod from the warm
// pool, from the call to its result (workspace staged and copied back).
func BenchmarkPooledRun(b *testing.B) {
	bk := newTestBackend(b, testConfig(b, 2))
	defer bk.Close()
	report(b, latencies(b, bk, func() { runPass(b, bk) }))
}

// BenchmarkColdRun is the same without a pool: each Run creates its Pod
// and waits for it to start.
func BenchmarkColdRun(b *testing.B) {
	bk := newTestBackend(b, testConfig(b, 0))
	defer bk.Close()
	report(b, latencies(b, nil, func() { runPass(b, bk) }))
}

// BenchmarkStart is New with no pool, Close excluded: the Lease, the
// sweep and the isolation probe, which starts one Pod (probe-pods, per
// start, says so); compare with BenchmarkColdRun, one Pod start and a run.
func BenchmarkStart(b *testing.B) {
	cfg := testConfig(b, 0)
	var probes int64
	lat := latencies(b, nil, func() {
		bk := newTestBackend(b, cfg)
		b.StopTimer()
		probes += bk.probes.Load()
		bk.Close()
	})
	report(b, lat)
	b.ReportMetric(float64(probes)/float64(b.N), "probe-pods")
}

func runPass(b *testing.B, bk *Backend) {
	spec := passSpec
	spec.Workspace = b.TempDir()
	res, err := bk.Run(context.Background(), spec)
	if err != nil || res.Status != sandbox.StatusOK {
		b.Fatalf("run: %v %s %s", err, res.Status, res.Stderr)
	}
}

// latencies times f b.N times; with a pool, each time once it holds an
// armed Pod again. f may stop the timer for its cleanup.
func latencies(b *testing.B, pool *Backend, f func()) []time.Duration {
	var lat []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		if pool != nil {
			waitIdle(b, pool, 1, 3*time.Minute)
		}
		start := time.Now()
		b.StartTimer()
		f()
		lat = append(lat, time.Since(start))
		b.StopTimer()
	}
	return lat
}

// report adds the median and the 90th percentile, in ms.
func report(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(lat[len(lat)/2]), "p50-ms")
	b.ReportMetric(ms(lat[len(lat)*9/10]), "p90-ms")
}

// BenchmarkBoundRun is a run with a dependency environment bound (a Pod
// of its own, the environment copied in by its stager: 400 files of
// 16 KiB in 20 directories, 6.25 MiB) against the cold run of the same
// program without one, in alternating order (ABBA) in one backend with no
// pool: both make a Pod per run, so the difference is the stager and
// the copy.
func BenchmarkBoundRun(b *testing.B) {
	bk := newTestBackend(b, testConfig(b, 0))
	defer bk.Close()
	env := b.TempDir()
	for d := 0; d < 20; d++ {
		dir := fmt.Sprintf("%s/pkg%d", env, d)
		if err := os.Mkdir(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		for f := 0; f < 20; f++ {
			if err := os.WriteFile(fmt.Sprintf("%s/m%d.py", dir, f), make([]byte, 16<<10), 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	bound := passSpec
	bound.Binds = []sandbox.Bind{{Source: env, Path: sandbox.BindRoot + "/python"}}
	run := func(spec sandbox.Spec) time.Duration {
		spec.Workspace = b.TempDir()
		start := time.Now()
		res, err := bk.Run(context.Background(), spec)
		if err != nil || res.Status != sandbox.StatusOK {
			b.Fatalf("run: %v %s %s", err, res.Status, res.Stderr)
		}
		return time.Since(start)
	}
	var cold, withEnv []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%2 == 0 {
			cold = append(cold, run(passSpec))
			withEnv = append(withEnv, run(bound))
		} else {
			withEnv = append(withEnv, run(bound))
			cold = append(cold, run(passSpec))
		}
	}
	b.StopTimer()
	slices.Sort(cold)
	slices.Sort(withEnv)
	c, w := cold[len(cold)/2], withEnv[len(withEnv)/2]
	b.ReportMetric(float64(c.Microseconds())/1000, "cold-p50-ms")
	b.ReportMetric(float64(w.Microseconds())/1000, "bound-p50-ms")
	b.ReportMetric(float64(w)/float64(c), "bound/cold")
}
