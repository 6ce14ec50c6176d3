//go:build linux && (amd64 || arm64)

package docker

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/sandbox/namespace"
)

// The benchmarks compare, in the same run and interleaved, a cold Docker
// execution (container created, started, exec'd and killed per execution),
// a pooled one (exec into a container started ahead) and the namespace
// backend with two launchers started ahead. Between iterations the
// backends' background work (removal, refill) is let finish, as the seconds
// between an agent's executions do. Run them with
//
//	go test ./sandbox/docker -run XXX -bench . -benchtime 50x
//
// and see docs/BENCHMARKS.md.

// BenchmarkPythonPass runs `python3 -c pass`.
func BenchmarkPythonPass(b *testing.B) { benchBackends(b, []string{"python3", "-c", "pass"}) }

// BenchmarkPandasImport runs `python3 -c "import pandas"`.
func BenchmarkPandasImport(b *testing.B) {
	benchBackends(b, []string{"python3", "-c", "import pandas"})
}

func benchBackends(b *testing.B, cmd []string) {
	engineOrSkip(b)
	cold, err := New(Config{Warm: 0})
	if err != nil {
		b.Fatal(err)
	}
	defer cold.Close()
	pooled, err := New(Config{Warm: 2})
	if err != nil {
		b.Fatal(err)
	}
	defer pooled.Close()
	ns, err := namespace.New(namespace.Config{Warm: 2})
	if err != nil {
		b.Fatal(err)
	}
	defer ns.Close()
	ws := b.TempDir()
	run := func(sb sandbox.Sandbox) time.Duration {
		t := time.Now()
		res, err := sb.Run(context.Background(), sandbox.Spec{Command: cmd, Workspace: ws})
		d := time.Since(t)
		if err != nil || res.Status != sandbox.StatusOK {
			b.Fatalf("%v %s %s", err, res.Status, res.Stderr)
		}
		return d
	}
	// One round first: the pool fills, page caches warm up.
	pooled.pool.wait()
	run(ns)
	run(cold)
	run(pooled)
	var tc, tp, tn []time.Duration
	b.ResetTimer()
	for range b.N {
		cold.pool.wait()
		pooled.pool.wait()
		tn = append(tn, run(ns))
		cold.pool.wait()
		tc = append(tc, run(cold))
		cold.pool.wait()
		tp = append(tp, run(pooled))
	}
	b.StopTimer()
	b.ReportMetric(ms(median(tc)), "cold-median-ms")
	b.ReportMetric(ms(median(tp)), "pooled-median-ms")
	b.ReportMetric(ms(pct(tp, 90)), "pooled-p90-ms")
	b.ReportMetric(ms(median(tn)), "namespace-median-ms")
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func median(d []time.Duration) time.Duration { return pct(d, 50) }

func pct(d []time.Duration, p int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}
