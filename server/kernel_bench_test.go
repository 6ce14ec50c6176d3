package server

import (
	"sort"
	"testing"
	"time"

	"github.com/codeagent/codeagent/sandbox"
)

// The benchmarks of issue 17's targets, each paired in one run with what
// the same work costs without kernels or warm interpreters, interleaved
// so that load on the machine weighs on both alike. See docs/BENCHMARKS.md.

// salesQuestion is the question a session asks of its loaded DataFrame.
const salesQuestion = "df.groupby('Product')['Revenue'].sum().nlargest(5)"

// salesProgram is the same question as a stateless program: it builds the
// DataFrame, then asks.
const salesProgram = `import numpy as np, pandas as pd
rng = np.random.default_rng(7)
df = pd.DataFrame({"Product": rng.choice([f"p{i}" for i in range(20)], 10000), "Revenue": rng.random(10000) * 100})
print(df.groupby('Product')['Revenue'].sum().nlargest(5))
`

// benchConfig lets a benchmark's requests through the API's rate limits.
var benchConfig = Config{Keys: twoKeys, RatePerSecond: 1e6, RateBurst: 1e6}

// timed returns how long f took.
func timed(f func()) time.Duration {
	t0 := time.Now()
	f()
	return time.Since(t0)
}

// reportMedians reports the median of each series in ms and the ratio of
// the first to the second.
func reportMedians(b *testing.B, name, baseline string, d, base []time.Duration) {
	m, mb := median(d), median(base)
	b.ReportMetric(float64(m)/1e6, name+"-ms")
	b.ReportMetric(float64(mb)/1e6, baseline+"-ms")
	b.ReportMetric(float64(m)/float64(mb), "ratio")
}

func median(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

// BenchmarkKernelCell is the round trip through the HTTP API of a cell
// asking salesQuestion of a loaded 10,000-row DataFrame, against the same
// question as a stateless program (POST /v1/exec, cold: pandas imported
// and the data built each time), and the resident memory of the idle
// kernel holding the DataFrame, as /metrics reports it.
func BenchmarkKernelCell(b *testing.B) {
	ts := newTestServer(b, testOptions{cfg: benchConfig, noModel: true, warm: 2, warmPython: 1})
	s := ts.createSession(b, aliceToken, "bench")
	if r := ts.cell(b, aliceToken, s.ID, loadSales, 200); r.Status != "ok" {
		b.Fatalf("load: %+v", r)
	}
	cell := func() {
		if r := ts.cell(b, aliceToken, s.ID, salesQuestion, 200); r.Status != "ok" || r.KernelRestarted {
			b.Fatalf("cell: %+v", r)
		}
	}
	cold := func() {
		var r sandbox.ResultJSON
		ts.json(b, "POST", "/v1/exec", aliceToken, map[string]any{"language": "python", "code": salesProgram}, 200, &r)
		if r.Status != "ok" {
			b.Fatalf("program: %+v", r)
		}
	}
	cell()
	cold()
	var cells, colds []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		cells = append(cells, timed(cell))
		colds = append(colds, timed(cold))
	}
	b.StopTimer()
	reportMedians(b, "cell", "program", cells, colds)
	time.Sleep(200 * time.Millisecond)
	_, m := ts.do(b, "GET", "/metrics", aliceToken, nil)
	b.ReportMetric(metric(string(m), "codeagent_kernel_idle_rss_max_bytes")/1e6, "idle-rss-MB")
}

// BenchmarkExecPandas is a stateless pandas program (salesProgram) through
// POST /v1/exec with warm interpreters (a pool of two, as `codeagent serve`
// keeps) against the cold path of a server without them, interleaved. A
// warm execution whose pool was empty runs cold and counts as such: the
// metric warm-hits says how many were warm.
func BenchmarkExecPandas(b *testing.B) {
	warm := newTestServer(b, testOptions{cfg: benchConfig, noModel: true, warm: 2, warmPython: 2})
	cold := newTestServer(b, testOptions{cfg: benchConfig, noModel: true, warm: 2})
	run := func(ts *testServer) func() {
		return func() {
			var r sandbox.ResultJSON
			ts.json(b, "POST", "/v1/exec", aliceToken, map[string]any{"language": "python", "code": salesProgram}, 200, &r)
			if r.Status != "ok" {
				b.Fatalf("program: %+v", r)
			}
		}
	}
	// The pool fills after its first use; give it the time to.
	run(warm)()
	run(cold)()
	time.Sleep(3 * time.Second)
	before := warmRuns(warm)
	var ws, cs []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ws = append(ws, timed(run(warm)))
		cs = append(cs, timed(run(cold)))
	}
	b.StopTimer()
	reportMedians(b, "warm", "cold", ws, cs)
	b.ReportMetric(float64(warmRuns(warm)-before)/float64(b.N), "warm-hits")
}

// warmRuns is how many executions of ts's backend ran warm.
func warmRuns(ts *testServer) int64 {
	for sb := ts.sb; sb != nil; {
		if w, ok := sb.(interface{ WarmRuns() int64 }); ok {
			return w.WarmRuns()
		}
		u, ok := sb.(interface{ Unwrap() sandbox.Sandbox }) // the egress layer
		if !ok {
			break
		}
		sb = u.Unwrap()
	}
	return 0
}
