package server

import (
	"bytes"
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/codeagent/codeagent/sandbox"
)

// BenchmarkServeExecThroughput measures, in the same run and with the same
// backend, executions per second of the sandbox called directly and of
// POST /v1/exec over HTTP, both at concurrency 2 with the same program and
// the same work around it (a temporary workspace, the program as a file),
// and reports their ratio.
func BenchmarkServeExecThroughput(b *testing.B) {
	ts := newTestServer(b, testOptions{noModel: true, warm: 2, cfg: Config{RatePerSecond: 1e6, RateBurst: 1e6}})
	const concurrency = 2
	const code = "pass\n"
	direct := func() {
		dir, err := os.MkdirTemp("", "codeagent-exec-")
		if err != nil {
			b.Fatal(err)
		}
		defer os.RemoveAll(dir)
		res, err := ts.sb.Run(context.Background(), sandbox.Spec{Command: []string{"python3", "/code/main.py"}, Workspace: dir,
			Files: []sandbox.File{{Path: "/code/main.py", Data: []byte(code)}}, Limits: sandbox.DefaultLimits()})
		if err != nil || res.Status != sandbox.StatusOK {
			b.Fatalf("direct: %v %v", res.Status, err)
		}
	}
	body := []byte(`{"language":"python","code":"pass\n"}`)
	api := func() {
		resp, out := ts.do(b, "POST", "/v1/exec", "", bytes.NewReader(body), "Content-Type", "application/json")
		if resp.StatusCode != 200 || !bytes.Contains(out, []byte(`"status":"ok"`)) {
			b.Fatalf("api: %d %s", resp.StatusCode, out)
		}
	}
	measure := func(f func()) float64 {
		for i := 0; i < 4; i++ { // warm up the pool for this command
			f()
		}
		jobs := make(chan struct{})
		var wg sync.WaitGroup
		start := time.Now()
		for w := 0; w < concurrency; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range jobs {
					f()
				}
			}()
		}
		for i := 0; i < b.N; i++ {
			jobs <- struct{}{}
		}
		close(jobs)
		wg.Wait()
		return float64(b.N) / time.Since(start).Seconds()
	}
	b.ResetTimer()
	sbRate := measure(direct)
	apiRate := measure(api)
	b.StopTimer()
	b.ReportMetric(sbRate, "sandbox-exec/s")
	b.ReportMetric(apiRate, "api-exec/s")
	b.ReportMetric(apiRate/sbRate, "ratio")
}
