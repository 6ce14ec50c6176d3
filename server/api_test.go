package server

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/codeagent/codeagent/agent"
	"github.com/codeagent/codeagent/llm/llmtest"
)

func TestServeRunStreamsEventsInOrder(t *testing.T) {
	ts := newTestServer(t, testOptions{replies: []llmtest.Reply{
		pyReply("import pandas as pd\nprint(pd.read_csv('sales.csv')['qty'].sum())\n"), // KeyError: repaired next
		pyReply(plotProgram),
		llmtest.Say(verifyOK),
	}})
	s := ts.createSession(t, "", "sales")
	if resp, b := ts.upload(t, "", s.ID, map[string]string{"sales.csv": salesCSV}); resp.StatusCode != http.StatusCreated {
		t.Fatalf("upload: %d %s", resp.StatusCode, b)
	}
	var files struct{ Files []fileJSON }
	ts.json(t, "GET", "/v1/sessions/"+s.ID+"/files", "", nil, 200, &files)
	if len(files.Files) != 1 || files.Files[0].Path != "sales.csv" || files.Files[0].Size != int64(len(salesCSV)) {
		t.Fatalf("files: %+v", files.Files)
	}
	var run runJSON
	ts.json(t, "POST", "/v1/sessions/"+s.ID+"/runs", "", map[string]any{"task": "plot monthly revenue as revenue.png"}, http.StatusAccepted, &run)
	// A second run in the same session must wait.
	ts.json(t, "POST", "/v1/sessions/"+s.ID+"/runs", "", map[string]any{"task": "again"}, http.StatusConflict, nil)

	evs := ts.events(t, "", run.ID, "")
	var types []string
	for i, e := range evs {
		types = append(types, string(e.Event.Type))
		if e.Name != string(e.Event.Type) || e.ID != strconv.Itoa(i+1) {
			t.Errorf("event %d: name %q id %q for %s", i, e.Name, e.ID, e.Event.Type)
		}
	}
	want := "attempt_start generated checked executed attempt_start generated checked executed verified done"
	if strings.Join(types, " ") != want {
		t.Fatalf("events:\n got %s\nwant %s", strings.Join(types, " "), want)
	}
	if evs[3].Event.Result == nil || evs[3].Event.Result.Status != "error" || evs[3].Event.ErrorClass == "" {
		t.Errorf("first execution: %+v", evs[3].Event)
	}
	if evs[5].Event.Code != plotProgram {
		t.Errorf("generated code: %q", evs[5].Event.Code)
	}
	// A late subscriber gets the same events; Last-Event-ID resumes.
	if late := ts.events(t, "", run.ID, ""); len(late) != len(evs) {
		t.Errorf("replay: %d events, want %d", len(late), len(evs))
	}
	if rest := ts.events(t, "", run.ID, "8"); len(rest) != 2 || rest[0].Event.Type != agent.EventVerified {
		t.Errorf("after id 8: %+v", rest)
	}

	got := ts.waitRun(t, "", run.ID)
	if got.Status != runSucceeded || got.Result == nil || !got.Result.Success || got.Result.Attempts != 2 {
		t.Fatalf("run: %+v", got)
	}
	if len(got.Result.Artifacts) != 1 || got.Result.Artifacts[0].Path != "revenue.png" {
		t.Fatalf("artifacts: %+v", got.Result.Artifacts)
	}
	if got.Result.Usage.Requests != 3 {
		t.Errorf("usage: %+v", got.Result.Usage)
	}
	resp, png := ts.do(t, "GET", "/v1/sessions/"+s.ID+"/files/revenue.png", "", nil)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "image/png" || !strings.HasPrefix(string(png), "\x89PNG") ||
		!strings.HasPrefix(resp.Header.Get("Content-Disposition"), "inline") || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Fatalf("png: %d %v", resp.StatusCode, resp.Header)
	}
	resp, _ = ts.do(t, "GET", "/v1/sessions/"+s.ID+"/files/sales.csv", "", nil)
	if resp.Header.Get("Content-Type") != "application/octet-stream" || !strings.HasPrefix(resp.Header.Get("Content-Disposition"), "attachment") {
		t.Errorf("csv headers: %v", resp.Header)
	}
	// Recorded like the CLI: the turn with its attempts, the audit log.
	var full sessionJSON
	ts.json(t, "GET", "/v1/sessions/"+s.ID, "", nil, 200, &full)
	if len(full.History) != 1 || full.History[0].Status != "succeeded" || full.History[0].Attempts != 2 || full.ActiveRun != "" {
		t.Errorf("history: %+v", full.History)
	}
	atts, err := ts.st.Attempts(context.Background(), run.ID)
	if err != nil || len(atts) != 2 {
		t.Errorf("attempts: %d, %v", len(atts), err)
	}
	if n, err := ts.st.CountAudit(context.Background(), "@anonymous/sales", "executed", time.Now().Add(-time.Hour)); err != nil || n != 2 {
		t.Errorf("audit executed records: %d, %v", n, err)
	}
	// The next turn sees the history.
	ts.model.Push(pyReply("print(open('revenue.png','rb').read()[:4])\n"), llmtest.Say(verifyOK))
	ts.json(t, "POST", "/v1/sessions/"+s.ID+"/runs", "", map[string]any{"task": "check the png"}, http.StatusAccepted, &run)
	if got := ts.waitRun(t, "", run.ID); got.Status != runSucceeded {
		t.Fatalf("second run: %+v", got)
	}
	if reqs := ts.model.Requests(); !strings.Contains(string(reqs[len(reqs)-2].Body), "revenue.png") {
		t.Error("second turn's prompt lacks the history")
	}
}

func TestServeRunWithoutModelFailsCleanly(t *testing.T) {
	ts := newTestServer(t, testOptions{noModel: true})
	s := ts.createSession(t, "", "")
	var run runJSON
	ts.json(t, "POST", "/v1/sessions/"+s.ID+"/runs", "", map[string]any{"task": "anything"}, http.StatusAccepted, &run)
	evs := ts.events(t, "", run.ID, "")
	if len(evs) != 1 || evs[0].Event.Type != agent.EventDone || *evs[0].Event.Success || !strings.Contains(evs[0].Event.Message, "no model") {
		t.Fatalf("events: %+v", evs)
	}
	if got := ts.waitRun(t, "", run.ID); got.Status != runFailed || !strings.Contains(got.Error, "no model") {
		t.Fatalf("run: %+v", got)
	}
}

func TestServeCancelRun(t *testing.T) {
	slow := llmtest.Say("```python\nprint(1)\n```")
	slow.Delay = 30 * time.Second
	ts := newTestServer(t, testOptions{replies: []llmtest.Reply{slow}})
	s := ts.createSession(t, "", "")
	var run runJSON
	ts.json(t, "POST", "/v1/sessions/"+s.ID+"/runs", "", map[string]any{"task": "slow"}, http.StatusAccepted, &run)
	ts.json(t, "POST", "/v1/runs/"+run.ID+"/cancel", "", nil, http.StatusAccepted, nil)
	start := time.Now()
	if got := ts.waitRun(t, "", run.ID); got.Status != runCanceled {
		t.Fatalf("run: %+v", got)
	}
	if time.Since(start) > 10*time.Second {
		t.Errorf("cancel took %v", time.Since(start))
	}
	ts.json(t, "DELETE", "/v1/sessions/"+s.ID, "", nil, http.StatusNoContent, nil)
	ts.json(t, "GET", "/v1/sessions/"+s.ID, "", nil, http.StatusNotFound, nil)
}

func TestServeExec(t *testing.T) {
	ts := newTestServer(t, testOptions{})
	var res struct {
		Status   string `json:"status"`
		ExitCode int    `json:"exit_code"`
		Stdout   string `json:"stdout"`
		Stderr   string `json:"stderr"`
	}
	ts.json(t, "POST", "/v1/exec", "", map[string]any{
		"language": "python", "code": "import os,sys\nprint(open('in.txt').read().strip(), sys.stdin.read(), os.environ['X'])\n",
		"files": map[string]string{"in.txt": "file"}, "stdin": "input", "env": map[string]string{"X": "env"},
		"limits": map[string]any{"timeout": "10s", "memory": "128MiB"},
	}, 200, &res)
	if res.Status != "ok" || res.Stdout != "file input env\n" {
		t.Fatalf("exec: %+v", res)
	}
	ts.json(t, "POST", "/v1/exec", "", map[string]any{"language": "bash", "code": "exit 3"}, 200, &res)
	if res.Status != "error" || res.ExitCode != 3 {
		t.Errorf("exit 3: %+v", res)
	}
	ts.json(t, "POST", "/v1/exec", "", map[string]any{"language": "python", "code": "while True: pass", "limits": map[string]any{"timeout": 500}}, 200, &res)
	if res.Status != "timeout" || res.ExitCode != 124 {
		t.Errorf("timeout: %+v", res)
	}
	for _, bad := range []map[string]any{
		{"language": "cobol", "code": "x"},
		{"language": "python", "code": ""},
		{"language": "python", "code": "1", "limits": map[string]any{"timeout": "1h"}},
		{"language": "python", "code": "1", "limits": map[string]any{"memory": "64GiB"}},
		{"language": "python", "code": "1", "limits": map[string]any{"memory": "lots"}},
		{"language": "python", "code": "1", "files": map[string]string{"../x": "1"}},
		{"language": "python", "code": "1", "env": map[string]string{"A=B": "1"}},
		{"language": "python", "code": "1", "unknown": true},
	} {
		ts.json(t, "POST", "/v1/exec", "", bad, http.StatusBadRequest, nil)
	}
}

func TestServeHealthMetricsOpenAPIAndPage(t *testing.T) {
	ts := newTestServer(t, testOptions{})
	var h map[string]any
	ts.json(t, "GET", "/v1/health", "", nil, 200, &h)
	if h["status"] != "ok" || h["auth"] != false || h["model"] != true {
		t.Errorf("health: %v", h)
	}
	ts.json(t, "POST", "/v1/exec", "", map[string]any{"language": "python", "code": "print(1)"}, 200, nil)
	resp, b := ts.do(t, "GET", "/metrics", "", nil)
	for _, want := range []string{`codeagent_executions_total{source="exec",status="ok"} 1`,
		`codeagent_execution_duration_seconds_count{source="exec"} 1`, "codeagent_exec_queue_waiting 0",
		"codeagent_exec_workers ", `codeagent_model_tokens_total{direction="input"} 0`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("metrics lack %q:\n%s", want, b)
		}
	}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain; version=0.0.4") {
		t.Errorf("metrics content type %q", resp.Header.Get("Content-Type"))
	}
	_, b = ts.do(t, "GET", "/v1/openapi.yaml", "", nil)
	var doc struct {
		Paths map[string]any `yaml:"paths"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil || doc.Paths["/v1/exec"] == nil || doc.Paths["/v1/runs/{id}/events"] == nil {
		t.Errorf("openapi: %v, %d paths", err, len(doc.Paths))
	}
	for _, p := range []string{"/", "/app.js", "/runs.js", "/approvals.js", "/style.css"} {
		resp, b := ts.do(t, "GET", p, "", nil)
		if resp.StatusCode != 200 || len(b) == 0 || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "script-src 'self'") {
			t.Errorf("%s: %d %v", p, resp.StatusCode, resp.Header)
		}
	}
	for _, p := range []string{"/nope.html", "/v1/nope", "/../etc/passwd"} {
		if resp, _ := ts.do(t, "GET", p, "", nil); resp.StatusCode != 404 {
			t.Errorf("%s: %d", p, resp.StatusCode)
		}
	}
}

func TestServeShutdownLetsExecutionsFinish(t *testing.T) {
	ts := newTestServer(t, testOptions{})
	done := make(chan string, 1)
	go func() {
		var res struct{ Status, Stdout string }
		ts.json(t, "POST", "/v1/exec", "", map[string]any{"language": "bash", "code": "sleep 1; echo finished"}, 200, &res)
		done <- res.Status + " " + res.Stdout
	}()
	time.Sleep(300 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	if err := ts.srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 400*time.Millisecond {
		t.Errorf("Shutdown returned after %v, before the execution finished", d)
	}
	select {
	case got := <-done:
		if got != "ok finished\n" {
			t.Errorf("exec during shutdown: %q", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no answer to the execution under way at shutdown")
	}
	ts.json(t, "POST", "/v1/exec", "", map[string]any{"language": "bash", "code": "echo"}, http.StatusServiceUnavailable, nil)
	ts.json(t, "GET", "/v1/health", "", nil, http.StatusServiceUnavailable, nil)
}

// TestServeSessionNamesUnique: sessions created without a name in quick
// succession (several in one millisecond) all get one, each its own.
func TestServeSessionNamesUnique(t *testing.T) {
	ts := newTestServer(t, testOptions{noModel: true})
	names := map[string]bool{}
	for range 30 {
		var s sessionJSON
		ts.json(t, "POST", "/v1/sessions", "", nil, http.StatusCreated, &s)
		if names[s.Name] || !strings.HasPrefix(s.Name, "session-") {
			t.Fatalf("session name %q given twice or malformed; so far %v", s.Name, names)
		}
		names[s.Name] = true
	}
}

// TestMetricsReportPools: /metrics reports the pools of sandboxes started
// ahead, and a program of the standard library alone does not ask the
// warm interpreters' pool while a pandas program does.
func TestMetricsReportPools(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("warm interpreters need root")
	}
	ts := newTestServer(t, testOptions{noModel: true, warm: 1, warmPython: 1})
	ts.json(t, "POST", "/v1/exec", "", map[string]any{"language": "python", "code": "import json\nprint(json.dumps(1))"}, 200, nil)
	python := func() (hits, misses int) {
		_, b := ts.do(t, "GET", "/metrics", "", nil)
		for _, want := range []string{`codeagent_pool_ready{pool="sandbox"} `, `codeagent_pool_size{pool="python"} 1`,
			`codeagent_pool_refill_cpu_seconds_total{pool="python"} `} {
			if !strings.Contains(string(b), want) {
				t.Fatalf("metrics lack %q:\n%s", want, b)
			}
		}
		fmt.Sscanf(string(b[strings.Index(string(b), `codeagent_pool_hits_total{pool="python"}`):]), `codeagent_pool_hits_total{pool="python"} %d`, &hits)
		fmt.Sscanf(string(b[strings.Index(string(b), `codeagent_pool_misses_total{pool="python"}`):]), `codeagent_pool_misses_total{pool="python"} %d`, &misses)
		return hits, misses
	}
	if h, m := python(); h+m != 0 {
		t.Fatalf("a program of the standard library asked the warm interpreters' pool (%d hits, %d misses)", h, m)
	}
	ts.json(t, "POST", "/v1/exec", "", map[string]any{"language": "python", "code": "import pandas\nprint(pandas.__name__)"}, 200, nil)
	if h, m := python(); h+m != 1 {
		t.Fatalf("a pandas program asked the warm interpreters' pool %d times, want once", h+m)
	}
}
