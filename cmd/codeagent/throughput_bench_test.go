package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkServeThroughput measures, in one run, executions a second of a
// small Python program at concurrency 8 (issue 32) three ways:
//
//   - serve: `codeagent serve` with its defaults (but the request rate
//     limit), POST /v1/exec;
//   - nowarm: the same server with --warm-python 0;
//   - exec: a `codeagent exec` process spawned per execution, 8 at a time.
//
// Each iteration runs one block of throughputBlock executions per way, in
// the order serve, nowarm, exec, then exec, nowarm, serve (ABBA over
// three), so that a trend in the machine's load weighs on each way alike.
// Between blocks the machine settles (each server's pools refilled) for
// throughputSettle. It reports each way's executions a second over all its
// blocks, the ratios the targets name, and the load average
// before and after. Run: go test ./cmd/codeagent -run XXX -bench
// ServeThroughput -benchtime 2x.
func BenchmarkServeThroughput(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("the servers' warm interpreters need root")
	}
	bin := mcpBinary(b)
	tmp := b.TempDir()
	prog := filepath.Join(tmp, "small.py")
	const code = "print(sum(i * i for i in range(1000)))\n"
	if err := os.WriteFile(prog, []byte(code), 0o644); err != nil {
		b.Fatal(err)
	}
	// The request rate limit (20 a second by default) is lifted on both:
	// it would cap both ways alike.
	serve := startServeBin(b, tmp, "--data-dir", b.TempDir(), "--rate", "100000").base
	nowarm := startServeBin(b, tmp, "--data-dir", b.TempDir(), "--rate", "100000", "--warm-python", "0").base
	body, _ := json.Marshal(map[string]string{"language": "python", "code": code})
	post := func(base string) func() error {
		return func() error {
			resp, err := http.Post(base+"/v1/exec", "application/json", bytes.NewReader(body))
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			var r struct{ Status, Stdout string }
			if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || resp.StatusCode != http.StatusOK || r.Status != "ok" || r.Stdout != "332833500\n" {
				return fmt.Errorf("answer %d %+v %v", resp.StatusCode, r, err)
			}
			return nil
		}
	}
	spawn := func() error {
		out, err := exec.Command(bin, "exec", prog).Output()
		if err != nil || string(out) != "332833500\n" {
			return fmt.Errorf("exec: %v %q", err, out)
		}
		return nil
	}
	ways := []struct {
		name string
		do   func() error
	}{{"serve", post(serve)}, {"nowarm", post(nowarm)}, {"exec", spawn}}
	total := make([]time.Duration, len(ways))
	count := make([]int, len(ways))
	loadBefore := loadAverage()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, w := range []int{0, 1, 2, 2, 1, 0} {
			time.Sleep(throughputSettle)
			d, err := throughputBlock(ways[w].do)
			if err != nil {
				b.Fatalf("%s: %v", ways[w].name, err)
			}
			total[w] += d
			count[w] += throughputExecutions
		}
	}
	b.StopTimer()
	rate := make([]float64, len(ways))
	for w := range ways {
		rate[w] = float64(count[w]) / total[w].Seconds()
		b.ReportMetric(rate[w], ways[w].name+"-exec/s")
	}
	b.ReportMetric(rate[0]/rate[2], "serve/exec")
	b.ReportMetric(rate[0]/rate[1], "serve/nowarm")
	b.Logf("load average %s before, %s after", loadBefore, loadAverage())
}

const (
	throughputExecutions = 120
	throughputConcurrent = 8
	throughputSettle     = 2 * time.Second
)

// throughputBlock runs do throughputExecutions times, throughputConcurrent
// at once, and returns how long that took.
func throughputBlock(do func() error) (time.Duration, error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	var first error
	var once sync.Once
	start := time.Now()
	for range throughputConcurrent {
		wg.Go(func() {
			for next.Add(1) <= throughputExecutions {
				if err := do(); err != nil {
					once.Do(func() { first = err })
					return
				}
			}
		})
	}
	wg.Wait()
	return time.Since(start), first
}

// loadAverage is the 1-minute load average.
func loadAverage() string {
	s, _ := os.ReadFile("/proc/loadavg")
	return strings.Fields(string(s) + " ?")[0]
}
