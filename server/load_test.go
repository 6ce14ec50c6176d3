package server

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

const loadMarkVar = "CODEAGENT_LOADTEST_MARK"

// processesWith lists host processes whose environment has mark.
func processesWith(mark string) []string {
	entries, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range entries {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err == nil && bytes.Contains(env, []byte(loadMarkVar+"="+mark)) {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestServeLoadExec sends 200 executions at concurrency 8, checks every
// answer, then that no sandbox process, mount or temporary directory is
// left once the server and the sandbox are closed.
func TestServeLoadExec(t *testing.T) {
	if testing.Short() {
		t.Skip("load test")
	}
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp) // every temporary directory of the server and sandbox goes here
	ts := newTestServer(t, testOptions{noModel: true, warm: 2, cfg: Config{RatePerSecond: 1000, RateBurst: 1000}})
	var b [6]byte
	_, _ = rand.Read(b[:])
	mark := hex.EncodeToString(b[:])

	const total, concurrency = 200, 8
	jobs := make(chan int)
	var mu sync.Mutex
	var failures []string
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < concurrency; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				body, _ := json.Marshal(map[string]any{"language": "python",
					"code": "import os\nprint('n=' + os.environ['N'])\n",
					"env":  map[string]string{"N": fmt.Sprint(i), loadMarkVar: mark}})
				resp, out := ts.do(t, "POST", "/v1/exec", "", bytes.NewReader(body), "Content-Type", "application/json")
				var res struct{ Status, Stdout string }
				err := json.Unmarshal(out, &res)
				if resp.StatusCode != 200 || err != nil || res.Status != "ok" || res.Stdout != fmt.Sprintf("n=%d\n", i) {
					mu.Lock()
					failures = append(failures, fmt.Sprintf("#%d: %d %s", i, resp.StatusCode, out))
					mu.Unlock()
				}
			}
		}()
	}
	for i := 0; i < total; i++ {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	elapsed := time.Since(start)
	t.Logf("%d executions at concurrency %d in %v (%.1f/s)", total, concurrency, elapsed.Round(time.Millisecond), total/elapsed.Seconds())
	if len(failures) > 0 {
		t.Fatalf("%d of %d failed, e.g. %s", len(failures), total, failures[0])
	}
	_, m := ts.do(t, "GET", "/metrics", "", nil)
	if !strings.Contains(string(m), fmt.Sprintf(`codeagent_executions_total{source="exec",status="ok"} %d`, total)) {
		t.Errorf("metrics do not count %d executions", total)
	}

	ts.Close()
	if err := ts.srv.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := ts.sb.Close(); err != nil {
		t.Fatalf("sandbox close: %v", err)
	}
	var left []string
	for i := 0; i < 50; i++ {
		if left = processesWith(mark); len(left) == 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(left) > 0 {
		t.Errorf("sandbox processes left: %v", left)
	}
	if entries, _ := os.ReadDir(tmp); len(entries) > 0 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("temporary directories left: %v", names)
	}
	if mi, err := os.ReadFile("/proc/self/mountinfo"); err == nil && bytes.Contains(mi, []byte(tmp)) {
		t.Errorf("mounts left under %s", tmp)
	}
}
