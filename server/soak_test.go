package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/codeagent/codeagent/llm/llmtest"
	"github.com/codeagent/codeagent/procid"
)

// resources are what a server could leak, counted for this process.
type resources struct {
	procs, cgroups, tempDirs, fds, containers int
}

func (r resources) String() string {
	return fmt.Sprintf("processes %d, cgroups %d, temporary directories %d, descriptors %d, containers %d",
		r.procs, r.cgroups, r.tempDirs, r.fds, r.containers)
}

// count measures this process's descendants, its run cgroups (named with
// its tag), the temporary workspaces in tmp, its open descriptors and
// codeagent's containers.
func count(tmp, data string) resources {
	var r resources
	parent := map[int]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		if i := strings.LastIndexByte(s, ')'); i > 0 {
			if f := strings.Fields(s[i+1:]); len(f) > 2 {
				parent[pid], _ = strconv.Atoi(f[1])
			}
		}
	}
	self := os.Getpid()
	for pid := range parent {
		for p, n := parent[pid], 0; p > 1 && n < 64; p, n = parent[p], n+1 {
			if p == self {
				r.procs++
				break
			}
		}
	}
	tag := procid.Self().Tag()
	filepath.WalkDir("/sys/fs/cgroup", func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if filepath.Base(filepath.Dir(path)) == "codeagent" && strings.HasPrefix(d.Name(), tag) {
			r.cgroups++
		}
		if strings.Count(path, "/") > 8 {
			return fs.SkipDir
		}
		return nil
	})
	m, _ := filepath.Glob(filepath.Join(tmp, "codeagent-exec-*"))
	r.tempDirs = len(m)
	// The store's files are not counted: database/sql keeps as many
	// connections open as concurrency once needed (each with the database,
	// its WAL and shared memory), which is a pool, not a leak.
	fds, _ := os.ReadDir("/proc/self/fd")
	for _, fd := range fds {
		if target, err := os.Readlink("/proc/self/fd/" + fd.Name()); err == nil && data != "" && strings.HasPrefix(target, data) {
			continue
		}
		r.fds++
	}
	if out, err := exec.Command("docker", "ps", "-aq", "--filter", "label=io.codeagent.managed=true").Output(); err == nil {
		r.containers = len(strings.Fields(string(out)))
	}
	return r
}

// TestSoakExec sends 1,000 executions from 16 clients at a server of 2
// workers and 4 places in its queue, each client honouring 429's
// Retry-After; among them programs that time out, are killed for memory
// or crash, and clients that hang up mid-execution. Afterwards nothing has
// grown: processes, cgroups, temporary directories, descriptors,
// containers.
func TestSoakExec(t *testing.T) {
	if testing.Short() {
		t.Skip("soak test (about 2 minutes)")
	}
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	ts := newTestServer(t, testOptions{noModel: true, warm: 2, cfg: Config{Workers: 2, QueueLength: 4, RatePerSecond: 1e6, RateBurst: 1e6}})
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 32}}
	post := func(ctx context.Context, body any) (int, http.Header, []byte, error) {
		b, _ := json.Marshal(body)
		req, _ := http.NewRequestWithContext(ctx, "POST", ts.URL+"/v1/exec", bytes.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			return 0, nil, nil, err
		}
		defer resp.Body.Close()
		out, err := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, out, err
	}
	// Warm up, then take the baseline.
	for range 4 {
		post(context.Background(), map[string]any{"language": "bash", "code": "echo"})
	}
	time.Sleep(time.Second)
	before := count(tmp, ts.data)

	type kind struct {
		name string
		body map[string]any
		want string // the status of the result, or "hangup"
	}
	kinds := []kind{
		{"timeout", map[string]any{"language": "python", "code": "while True: pass", "limits": map[string]any{"timeout": 300}}, "timeout"},
		{"memory", map[string]any{"language": "python", "code": "b = bytearray(200 << 20)\nprint(len(b))", "limits": map[string]any{"memory": "32MiB"}}, "memory_limit"},
		{"crash", map[string]any{"language": "bash", "code": "kill -SEGV $$"}, "signaled"},
		{"hangup", map[string]any{"language": "bash", "code": "sleep 5"}, "hangup"},
	}
	const total, clients = 1000, 16
	jobs := make(chan int)
	var mu sync.Mutex
	stats := map[string]int{}
	var failures []string
	var wg sync.WaitGroup
	start := time.Now()
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				k := kind{"ok", map[string]any{"language": "bash", "code": fmt.Sprintf("echo %d", i)}, "ok"}
				if i%10 < len(kinds) && i%3 == 0 { // about 13% abnormal
					k = kinds[i%10]
				}
				for {
					ctx, cancel := context.WithCancel(context.Background())
					if k.want == "hangup" {
						ctx, cancel = context.WithTimeout(context.Background(), 150*time.Millisecond)
					}
					code, h, out, err := post(ctx, k.body)
					cancel()
					mu.Lock()
					switch {
					case k.want == "hangup" && err != nil:
						stats["hangup"]++
					case code == http.StatusTooManyRequests:
						stats["429"]++
						mu.Unlock()
						wait, _ := strconv.Atoi(h.Get("Retry-After"))
						time.Sleep(time.Duration(max(wait, 1)) * time.Second)
						continue
					case err != nil || code != 200:
						failures = append(failures, fmt.Sprintf("%s #%d: %d %v %s", k.name, i, code, err, out))
					default:
						var res struct{ Status string }
						json.Unmarshal(out, &res)
						if res.Status != k.want {
							failures = append(failures, fmt.Sprintf("%s #%d: status %s: %s", k.name, i, res.Status, out))
						}
						stats[res.Status]++
					}
					mu.Unlock()
					break
				}
			}
		}()
	}
	for i := range total {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	elapsed := time.Since(start)
	client.CloseIdleConnections()
	var after resources
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		after = count(tmp, ts.data)
		if after.procs <= before.procs && after.cgroups <= before.cgroups && after.tempDirs <= before.tempDirs &&
			after.fds <= before.fds+2 || time.Now().After(deadline) {
			break
		}
	}
	t.Logf("%d executions from %d clients in %v (%.1f/s); results %v", total, clients, elapsed.Round(time.Millisecond), total/elapsed.Seconds(), stats)
	t.Logf("before: %v", before)
	t.Logf("after:  %v", after)
	if len(failures) > 0 {
		t.Errorf("%d failed, e.g. %s", len(failures), strings.Join(failures[:min(3, len(failures))], "\n"))
	}
	if stats["429"] == 0 || stats["hangup"] == 0 || stats["timeout"] == 0 || stats["memory_limit"] == 0 || stats["signaled"] == 0 {
		t.Errorf("the mix did not happen: %v", stats)
	}
	if after.procs > before.procs || after.cgroups > before.cgroups || after.tempDirs > before.tempDirs ||
		after.fds > before.fds+2 || after.containers > before.containers {
		t.Errorf("resources grew: before %v, after %v", before, after)
	}
}

// largeProgram is a program the checker takes a while to parse, and then
// refuses (it imports subprocess), so that it never runs.
func largeProgram(lines int) string {
	var b strings.Builder
	b.WriteString("```python\nimport subprocess\n")
	for i := range lines {
		fmt.Fprintf(&b, "def f%d(x):\n    return [y * %d for y in range(x) if y %% 3 == %d]\n", i, i, i%3)
	}
	b.WriteString("```")
	return b.String()
}

// TestCancelCycles starts 1,000 runs whose model answers a large program
// and cancels each at once (often while the checker parses it: the
// tree-sitter crash on a cancelled parse), then checks that the server
// still answers and still completes a run.
func TestCancelCycles(t *testing.T) {
	if testing.Short() {
		t.Skip("1,000 cycles")
	}
	n := 1000
	if v, err := strconv.Atoi(os.Getenv("CODEAGENT_CANCEL_CYCLES")); err == nil && v > 0 {
		n = v
	}
	big := llmtest.Say(largeProgram(1000))
	replies := make([]llmtest.Reply, 0, n+2)
	for range n {
		replies = append(replies, big)
	}
	ts := newTestServer(t, testOptions{replies: replies, cfg: Config{RatePerSecond: 1e6, RateBurst: 1e6}})
	var sess sessionJSON
	start := time.Now()
	for i := range n {
		if i%20 == 0 { // a session's history is read at each run: keep it short
			sess = ts.createSession(t, "", fmt.Sprintf("cancel-%d", i))
		}
		var r runJSON
		ts.json(t, "POST", "/v1/sessions/"+sess.ID+"/runs", "", map[string]any{"task": "analyse", "verify": false, "max_iterations": 1}, http.StatusAccepted, &r)
		time.Sleep(time.Duration(i%25) * time.Millisecond) // before, during or after the parse
		ts.json(t, "POST", "/v1/runs/"+r.ID+"/cancel", "", nil, http.StatusAccepted, nil)
		evs := ts.events(t, "", r.ID, "")
		if len(evs) == 0 || evs[len(evs)-1].Name != "done" {
			t.Fatalf("cycle %d: the run's stream did not end with done: %v", i, evs)
		}
		if i%100 == 99 {
			var res struct{ Stdout string }
			ts.json(t, "POST", "/v1/exec", "", map[string]any{"language": "bash", "code": "echo alive"}, 200, &res)
			if res.Stdout != "alive\n" {
				t.Fatalf("cycle %d: exec %q", i, res.Stdout)
			}
		}
	}
	t.Logf("%d start-cancel cycles in %v", n, time.Since(start).Round(time.Millisecond))
	ts.model.Push(llmtest.Say("```python\nprint('still fine')\n```"))
	// Replies the canceled runs never asked for come first.
	left := ts.model.Remaining() - 1
	for range left {
		ts.json(t, "POST", "/v1/sessions/"+sess.ID+"/runs", "", map[string]any{"task": "drain", "verify": false, "max_iterations": 1}, http.StatusAccepted, nil)
		waitIdle(t, ts, sess.ID)
	}
	var r runJSON
	ts.json(t, "POST", "/v1/sessions/"+sess.ID+"/runs", "", map[string]any{"task": "print", "verify": false}, http.StatusAccepted, &r)
	ts.events(t, "", r.ID, "")
	ts.json(t, "GET", "/v1/runs/"+r.ID, "", nil, 200, &r)
	if r.Status != runSucceeded || r.Result == nil || r.Result.Output != "still fine\n" {
		t.Fatalf("a run after the cycles: %+v", r)
	}
}

// waitIdle waits until the session has no run under way.
func waitIdle(t *testing.T, ts *testServer, id string) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		var s sessionJSON
		ts.json(t, "GET", "/v1/sessions/"+id, "", nil, 200, &s)
		if s.ActiveRun == "" {
			return
		}
	}
	t.Fatal("the session's run did not end")
}
