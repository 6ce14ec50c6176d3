package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/codeagent/codeagent/agent"
	"github.com/codeagent/codeagent/app"
	"github.com/codeagent/codeagent/llm"
	"github.com/codeagent/codeagent/llm/llmtest"
	"github.com/codeagent/codeagent/mcpserver"
	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/sandbox/backends"
	"github.com/codeagent/codeagent/store"
)

// testServer is a Server over real HTTP with the real sandbox and store,
// and a fake model server.
type testServer struct {
	*httptest.Server
	srv   *Server
	st    *store.Store
	sb    sandbox.Sandbox
	model *llmtest.Server
	// reviewer is the reviewer model's server (testOptions.review).
	reviewer *llmtest.Server
	data     string
	km       *app.Kernels // shared with MCP, closed before the sandbox
}

type testOptions struct {
	cfg     Config
	noModel bool
	replies []llmtest.Reply
	warm    int
	// warmPython keeps warm interpreters (kernels and Python programs
	// start in them).
	warmPython int
	mcp        bool // serve MCP at /mcp
	mcpCfg     mcpserver.Config
	data       string // the data directory; default a new temporary one
	// review, when not nil, scripts a reviewer model at its own endpoint
	// (Deps.Review, model "review-default").
	review []llmtest.Reply
}

func newTestServer(t testing.TB, o testOptions) *testServer {
	t.Helper()
	ctx := context.Background()
	data := o.data
	if data == "" {
		data = t.TempDir()
	}
	st, err := store.Open(ctx, filepath.Join(data, "codeagent.db"))
	if err != nil {
		t.Fatal(err)
	}
	sb, err := backends.Open("auto", backends.Options{Warm: o.warm, WarmPython: o.warmPython})
	if err != nil {
		st.Close()
		t.Fatalf("sandbox: %v", err)
	}
	ts := &testServer{st: st, sb: sb, data: data}
	deps := Deps{Store: st, Sandbox: sb, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if testing.Verbose() {
		deps.Logger = slog.New(slog.NewTextHandler(testWriter{t}, nil))
	}
	if !o.noModel {
		ts.model = llmtest.NewOpenAIServer(t, o.replies...)
		cfg := llmtest.Config(llm.ProviderOpenAI, ts.model.BaseURL)
		deps.Model = &cfg
	}
	if o.review != nil {
		ts.reviewer = llmtest.NewOpenAIServer(t, o.review...)
		cfg := llmtest.Config(llm.ProviderOpenAI, ts.reviewer.BaseURL)
		cfg.Model, cfg.APIKey = "review-default", "review-test-key"
		deps.Review = &cfg
	}
	if o.mcp {
		// One queue and one kernel manager for the API and MCP, as
		// `codeagent serve` has.
		execs := app.NewExecutions(sb, o.cfg.Workers, o.cfg.QueueLength)
		deps.Executions = execs
		deps.Kernels = app.NewKernels(o.cfg.kernelsConfig(sb, deps.Logger), execs)
		ts.km = deps.Kernels
		o.mcpCfg.WorkDir = t.TempDir()
		m, err := mcpserver.New(o.mcpCfg, mcpserver.Deps{Sandbox: execs.Sandbox("mcp", true), Store: st, Logger: deps.Logger, Kernels: deps.Kernels})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		deps.MCP = m
	}
	o.cfg.DataDir = data
	ts.srv, err = New(o.cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	ts.Server = httptest.NewServer(ts.srv.Handler())
	t.Cleanup(func() {
		ts.Server.CloseClientConnections()
		ts.Server.Close()
		sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		if err := ts.srv.Shutdown(sctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if ts.km != nil {
			ts.km.Close()
		}
		sb.Close()
		st.Close()
	})
	return ts
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

// do sends a request with token (may be "") and returns the response with
// its body read.
func (ts *testServer) do(t testing.TB, method, path, token string, body io.Reader, header ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, ts.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read: %v", method, path, err)
	}
	return resp, b
}

// json sends v as JSON and decodes the answer into out (when non-nil),
// failing unless the status is want.
func (ts *testServer) json(t testing.TB, method, path, token string, v any, want int, out any) http.Header {
	t.Helper()
	var body io.Reader
	if v != nil {
		b, _ := json.Marshal(v)
		body = bytes.NewReader(b)
	}
	resp, b := ts.do(t, method, path, token, body, "Content-Type", "application/json")
	if resp.StatusCode != want {
		t.Fatalf("%s %s: status %d, want %d: %s", method, path, resp.StatusCode, want, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, path, err, b)
		}
	}
	return resp.Header
}

func (ts *testServer) createSession(t testing.TB, token, name string) sessionJSON {
	t.Helper()
	var s sessionJSON
	ts.json(t, "POST", "/v1/sessions", token, map[string]string{"name": name}, http.StatusCreated, &s)
	return s
}

// upload sends files as one multipart body and returns the response.
func (ts *testServer) upload(t testing.TB, token, sessionID string, files map[string]string) (*http.Response, []byte) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for name, content := range files {
		h := make(map[string][]string)
		h["Content-Disposition"] = []string{`form-data; name="file"; filename="` + name + `"`}
		h["Content-Type"] = []string{"text/csv"}
		pw, err := mw.CreatePart(h)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(pw, content)
	}
	mw.Close()
	return ts.do(t, "POST", "/v1/sessions/"+sessionID+"/files", token, &buf, "Content-Type", mw.FormDataContentType())
}

// sseEvent is one event of a stream.
type sseEvent struct {
	ID    string
	Name  string
	Event agent.Event
}

// events reads a run's SSE stream to its end (bounded by a timeout).
func (ts *testServer) events(t testing.TB, token, runID, lastID string) []sseEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", ts.URL+"/v1/runs/"+runID+"/events", nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("events: status %d, %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var out []sseEvent
	var cur sseEvent
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 8<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.Name != "" {
				out = append(out, cur)
			}
			cur = sseEvent{}
		case strings.HasPrefix(line, "id: "):
			cur.ID = line[4:]
		case strings.HasPrefix(line, "event: "):
			cur.Name = line[7:]
		case strings.HasPrefix(line, "data: "):
			if err := json.Unmarshal([]byte(line[6:]), &cur.Event); err != nil {
				t.Fatalf("event data: %v: %s", err, line)
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("events: %v", err)
	}
	return out
}

func (ts *testServer) waitRun(t testing.TB, token, runID string) runJSON {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		var r runJSON
		ts.json(t, "GET", "/v1/runs/"+runID, token, nil, http.StatusOK, &r)
		if r.Status != runRunning {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s still running", runID)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func pyReply(code string) llmtest.Reply { return llmtest.Say("```python\n" + code + "```") }

const salesCSV = `date,product,units,unit_price
2024-01-05,Widget,10,2.50
2024-01-17,Gadget,3,12.00
2024-02-02,Widget,7,2.50
2024-02-14,Gizmo,4,8.00
2024-03-01,Gadget,5,12.00
2024-03-30,Whatsit,20,0.75
`

const plotProgram = `import pandas as pd
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

df = pd.read_csv("sales.csv", parse_dates=["date"])
df["revenue"] = df["units"] * df["unit_price"]
monthly = df.set_index("date")["revenue"].resample("MS").sum()
print(monthly.to_string())
ax = monthly.plot(marker="o", title="Monthly revenue")
ax.set_ylabel("revenue")
plt.tight_layout()
plt.savefig("revenue.png")
print("Saved revenue.png")
`

const verifyOK = `{"task_complete": true, "missing": ""}`
