package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/codeagent/codeagent/kernel"
)

// cell runs code in the session's kernel as token and returns the result.
func (ts *testServer) cell(t testing.TB, token, id, code string, want int) kernel.ResultJSON {
	t.Helper()
	var r kernel.ResultJSON
	ts.json(t, "POST", "/v1/sessions/"+id+"/exec", token, map[string]any{"language": "python", "code": code, "state": "keep"}, want, &r)
	return r
}

func resultText(r kernel.ResultJSON) string {
	for _, d := range r.Display {
		if d.Kind == "result" {
			return d.Data["text/plain"]
		}
	}
	return ""
}

const loadSales = `import numpy as np, pandas as pd
rng = np.random.default_rng(7)
df = pd.DataFrame({"Product": rng.choice([f"p{i}" for i in range(20)], 10000), "Revenue": rng.random(10000) * 100})
len(df)`

// TestSessionKernel drives a session's kernel through the API: state
// across cells, a DataFrame as text and HTML, a figure as PNG and in the
// workspace, the kernel in the session's view and the metrics, a restart,
// and fresh executions beside it.
func TestSessionKernel(t *testing.T) {
	ts := newTestServer(t, testOptions{cfg: Config{Keys: twoKeys}, noModel: true, warmPython: 2})
	s := ts.createSession(t, aliceToken, "analysis")
	if r := ts.cell(t, aliceToken, s.ID, loadSales, 200); r.Status != "ok" || resultText(r) != "10000" || r.KernelRestarted {
		t.Fatalf("load: %+v", r)
	}
	r := ts.cell(t, aliceToken, s.ID, "df.groupby('Product')['Revenue'].sum().nlargest(5)", 200)
	if r.Status != "ok" || !strings.Contains(resultText(r), "Name: Revenue, dtype: float64") || r.ExecutionCount != 2 {
		t.Fatalf("groupby: %+v", r)
	}
	r = ts.cell(t, aliceToken, s.ID, "df.head()", 200)
	if len(r.Display) != 1 || !strings.Contains(r.Display[0].Data["text/html"], "<table") {
		t.Fatalf("head: %+v", r.Display)
	}
	r = ts.cell(t, aliceToken, s.ID, "df.groupby('Product')['Revenue'].sum().plot(kind='bar'); print('plotted')", 200)
	if len(r.Images) != 1 || r.Stdout != "plotted\n" || r.Display[0].Data["image/png"] == "" {
		t.Fatalf("figure: images %v stdout %q stderr %s", r.Images, r.Stdout, r.Stderr)
	}
	resp, png := ts.do(t, "GET", "/v1/sessions/"+s.ID+"/files/"+r.Images[0], aliceToken, nil)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "image/png" || !strings.HasPrefix(string(png), "\x89PNG") {
		t.Fatalf("the figure in the workspace: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var view sessionJSON
	ts.json(t, "GET", "/v1/sessions/"+s.ID, aliceToken, nil, 200, &view)
	if view.Kernel == nil || !view.Kernel.Alive || view.Kernel.MemoryBytes <= 0 || view.Kernel.RSSBytes <= 0 || view.Kernel.ExecutionCount != 4 {
		t.Fatalf("session view: %+v", view.Kernel)
	}
	_, m := ts.do(t, "GET", "/metrics", aliceToken, nil)
	idle := metric(string(m), "codeagent_kernel_idle_rss_max_bytes")
	if metric(string(m), "codeagent_kernels_live") != 1 || idle <= 0 || metric(string(m), "codeagent_kernel_cells_total") != 4 {
		t.Fatalf("metrics:\n%s", m)
	}
	t.Logf("an idle kernel with a 10,000-row DataFrame: %.0f MB resident", idle/1e6)
	if idle > 150e6 {
		t.Errorf("an idle kernel holds %.0f MB, more than 150 MB", idle/1e6)
	}

	// A fresh execution in the same workspace does not see the kernel's state.
	var fresh struct{ Status, Stdout string }
	ts.json(t, "POST", "/v1/sessions/"+s.ID+"/exec", aliceToken, map[string]any{"language": "python",
		"code": "import os\nprint('df' in dir(), sorted(os.listdir('.')))"}, 200, &fresh)
	if fresh.Status != "ok" || fresh.Stdout != "False ['figure-1.png']\n" {
		t.Fatalf("fresh: %+v", fresh)
	}
	var restarted map[string]bool
	ts.json(t, "DELETE", "/v1/sessions/"+s.ID+"/kernel", aliceToken, nil, 200, &restarted)
	if !restarted["restarted"] {
		t.Fatalf("restart: %v", restarted)
	}
	r = ts.cell(t, aliceToken, s.ID, "'df' in globals()", 200)
	if !r.KernelRestarted || r.RestartReason != "restart" || resultText(r) != "False" {
		t.Fatalf("after the restart: %+v", r)
	}
	for _, body := range []map[string]any{
		{"language": "bash", "code": "echo", "state": "keep"},
		{"language": "python", "code": "1", "state": "forever"},
		{"language": "python", "code": "1", "state": "keep", "limits": map[string]any{"memory": "2GiB"}},
		{"language": "python", "code": "1", "state": "keep", "env": map[string]string{"A": "b"}},
	} {
		ts.json(t, "POST", "/v1/sessions/"+s.ID+"/exec", aliceToken, body, 400, nil)
	}
	ts.json(t, "DELETE", "/v1/sessions/"+s.ID, aliceToken, nil, 204, nil)
	if _, ok := ts.srv.kernels.Status(kernelKey("alice", s.ID)); ok {
		t.Fatal("the deleted session's kernel is still known")
	}
}

// metric reads an unlabelled value from the Prometheus text.
func metric(text, name string) float64 {
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return -1
}

// TestSessionKernelTimeout interrupts a cell at its limit; the state stays.
func TestSessionKernelTimeout(t *testing.T) {
	ts := newTestServer(t, testOptions{noModel: true, warmPython: 1})
	s := ts.createSession(t, "", "slow")
	ts.cell(t, "", s.ID, "x = 'kept'", 200)
	var r kernel.ResultJSON
	start := time.Now()
	ts.json(t, "POST", "/v1/sessions/"+s.ID+"/exec", "", map[string]any{"language": "python", "state": "keep",
		"code": "import time\ntime.sleep(60)", "limits": map[string]any{"timeout": "1s"}}, 200, &r)
	if r.Status != "timeout" || r.KernelDied || time.Since(start) > 5*time.Second || !strings.Contains(r.Stderr, "KeyboardInterrupt") {
		t.Fatalf("after %v: %+v", time.Since(start), r)
	}
	if r = ts.cell(t, "", s.ID, "x", 200); resultText(r) != "'kept'" || r.KernelRestarted {
		t.Fatalf("state after the interrupt: %+v", r)
	}
}

// TestSessionKernelCap caps the server at one kernel: a cell for another
// session evicts the idle one (which then says so), and while the only
// kernel is busy another session's cell gets 429 with Retry-After.
func TestSessionKernelCap(t *testing.T) {
	ts := newTestServer(t, testOptions{noModel: true, warmPython: 1, cfg: Config{MaxKernels: 1}})
	a, b := ts.createSession(t, "", "a"), ts.createSession(t, "", "b")
	ts.cell(t, "", a.ID, "x = 1", 200)
	ts.cell(t, "", b.ID, "y = 2", 200)
	if r := ts.cell(t, "", a.ID, "'x' in globals()", 200); !r.KernelRestarted || r.RestartReason != "evicted" || resultText(r) != "False" {
		t.Fatalf("evicted kernel: %+v", r)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		ts.cell(t, "", a.ID, "import time\ntime.sleep(3)", 200)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for st, _ := ts.srv.kernels.Status(kernelKey(Anonymous, a.ID)); !st.Busy; st, _ = ts.srv.kernels.Status(kernelKey(Anonymous, a.ID)) {
		if time.Now().After(deadline) {
			t.Fatal("the cell did not start")
		}
		time.Sleep(20 * time.Millisecond)
	}
	resp, body := ts.do(t, "POST", "/v1/sessions/"+b.ID+"/exec", "", strings.NewReader(`{"language":"python","code":"1","state":"keep"}`), "Content-Type", "application/json")
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(body), "kernels_busy") {
		t.Fatalf("with the only kernel busy: %d %s %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	wg.Wait()
}

// TestSessionKernelIsolation: a cell of another API key cannot reach a
// kernel, nor see it. Bob cannot run in, restart or see Alice's session;
// his own kernel has none of her state, no process of hers, and nothing of
// her secret anywhere it can look: /proc, /tmp, /dev/shm, its workspace.
func TestSessionKernelIsolation(t *testing.T) {
	ts := newTestServer(t, testOptions{cfg: Config{Keys: twoKeys}, noModel: true, warmPython: 2})
	var b [12]byte
	_, _ = rand.Read(b[:])
	secret := "s3cret-" + hex.EncodeToString(b[:])
	alice := ts.createSession(t, aliceToken, "mine")
	ts.cell(t, aliceToken, alice.ID, "import os\nsecret = '"+secret+"'\nos.environ['SECRET'] = secret\nopen('/tmp/s', 'w').write(secret)\nopen('/dev/shm/s', 'w').write(secret)\nopen('s.txt', 'w').write(secret)", 200)
	ts.json(t, "POST", "/v1/sessions/"+alice.ID+"/exec", bobToken, map[string]any{"language": "python", "code": "secret", "state": "keep"}, 404, nil)
	ts.json(t, "DELETE", "/v1/sessions/"+alice.ID+"/kernel", bobToken, nil, 404, nil)
	ts.json(t, "GET", "/v1/sessions/"+alice.ID, bobToken, nil, 404, nil)
	bob := ts.createSession(t, bobToken, "mine") // the same name: another session
	r := ts.cell(t, bobToken, bob.ID, `import os, glob
found = []
for p in glob.glob('/proc/[0-9]*/*') + glob.glob('/tmp/**', recursive=True) + glob.glob('/dev/shm/*') + glob.glob('/workspace/**', recursive=True):
    try:
        if os.path.isfile(p) and b'`+secret+`' in open(p, 'rb').read(1 << 20):
            found.append(p)
    except OSError:
        pass
procs = sorted(int(p) for p in os.listdir('/proc') if p.isdigit())
('secret' in globals(), found, procs)`, 200)
	if r.Status != "ok" || resultText(r) != "(False, [], [1, 2])" || strings.Contains(r.Stdout+r.Stderr, secret) {
		t.Fatalf("bob's kernel: %s %s %s", r.Status, resultText(r), r.Stderr)
	}
	if r := ts.cell(t, aliceToken, alice.ID, "secret == open('s.txt').read()", 200); resultText(r) != "True" {
		t.Fatalf("alice's kernel: %+v", r)
	}
}

// TestMCPKeepState runs execute_code with keep_state in two MCP sessions:
// each has its own kernel, and a figure comes back as image content.
func TestMCPKeepState(t *testing.T) {
	ts := newTestServer(t, testOptions{cfg: Config{Keys: twoKeys}, noModel: true, mcp: true, warmPython: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	call := func(sess *mcp.ClientSession, code string) (map[string]any, *mcp.CallToolResult) {
		t.Helper()
		res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: "execute_code",
			Arguments: map[string]any{"language": "python", "code": code, "keep_state": true}})
		if err != nil || res.IsError {
			t.Fatalf("execute_code: %v %+v", err, res)
		}
		out, _ := res.StructuredContent.(map[string]any)
		return out, res
	}
	one, err := connectMCP(ctx, ts.URL, aliceToken)
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	two, err := connectMCP(ctx, ts.URL, aliceToken)
	if err != nil {
		t.Fatal(err)
	}
	defer two.Close()
	call(one, "x = 'first session'")
	if out, _ := call(two, "'x' in globals()"); !strings.Contains(toJSON(out["display"]), `"False"`) {
		t.Fatalf("the second session sees the first's kernel: %v", out)
	}
	out, res := call(one, "import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nx")
	var images int
	for _, c := range res.Content {
		if img, ok := c.(*mcp.ImageContent); ok && img.MIMEType == "image/png" && strings.HasPrefix(string(img.Data), "\x89PNG") {
			images++
		}
	}
	if images != 1 || !strings.Contains(toJSON(out["display"]), "first session") || strings.Contains(toJSON(out), "iVBOR") {
		t.Fatalf("images %d, output %v", images, out)
	}
	if out, _ := call(one, "import sys; sys.exit(3)"); out["exit_code"] != float64(3) || out["kernel_died"] == true {
		t.Fatalf("exit: %v", out)
	}
}

func toJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
