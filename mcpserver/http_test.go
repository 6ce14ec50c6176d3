package mcpserver_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/codeagent/codeagent/mcpserver"
	"github.com/codeagent/codeagent/sandbox/backends"
	"github.com/codeagent/codeagent/store"
)

const tokenA, tokenB = "token-a-0123456789abcdef", "token-b-0123456789abcdef"

// bearer stands in for the HTTP server's authentication: it admits the two
// keys and nothing else.
func bearer(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Header.Get("Authorization") {
		case "Bearer " + tokenA, "Bearer " + tokenB:
			h.ServeHTTP(w, r)
		default:
			http.Error(w, "unauthorized", http.StatusUnauthorized)
		}
	})
}

type withToken struct{ token string }

func (t withToken) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+t.token)
	return http.DefaultTransport.RoundTrip(r)
}

func newServer(t *testing.T) (*mcpserver.Server, string, *store.Store) {
	t.Helper()
	sb, err := backends.Open("auto", backends.Options{})
	if err != nil {
		t.Fatalf("the sandbox cannot run here (see codeagent doctor): %v", err)
	}
	t.Cleanup(func() { sb.Close() })
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "codeagent.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	work := t.TempDir()
	srv, err := mcpserver.New(mcpserver.Config{WorkDir: work}, mcpserver.Deps{Sandbox: sb, Store: st})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv, work, st
}

func TestMCPOverStreamableHTTP(t *testing.T) {
	srv, work, st := newServer(t)
	ts := httptest.NewServer(bearer(srv.Handler()))
	defer ts.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil)
	sess, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: ts.URL,
		HTTPClient: &http.Client{Transport: withToken{tokenA}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tools, err := sess.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	// No model: run_task is not offered.
	if got := strings.Join(names, ","); got != "check_code,execute_code,list_files,read_file,write_file" {
		t.Fatalf("tools: %s", got)
	}
	res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: "execute_code",
		Arguments: map[string]any{"language": "bash", "code": "echo made > out.txt; echo ok"}})
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Status string `json:"status"`
		Stdout string `json:"stdout"`
		Files  []struct{ Path string }
	}
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &out); err != nil || res.IsError || out.Status != "ok" || out.Stdout != "ok\n" ||
		len(out.Files) != 1 || out.Files[0].Path != "out.txt" {
		t.Fatalf("execute_code: %s", b)
	}

	// The key that opened the session may use it, another may not, and no
	// key gets nothing.
	body := `{"jsonrpc":"2.0","id":9,"method":"tools/list","params":{}}`
	for token, want := range map[string]int{tokenA: http.StatusOK, tokenB: http.StatusForbidden, "": http.StatusUnauthorized} {
		req, _ := http.NewRequest(http.MethodPost, ts.URL, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", sess.ID())
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("token %q: status %d, want %d", token, resp.StatusCode, want)
		}
	}

	// Closing the session removes its workspace.
	if ws, _ := os.ReadDir(work); len(ws) != 1 {
		t.Fatalf("workspaces: %v", ws)
	}
	if err := sess.Close(); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if ws, _ := os.ReadDir(work); len(ws) == 0 {
			break
		}
		if time.Now().After(end) {
			t.Fatal("the closed session's workspace is still there")
		}
	}
	recs, err := st.AuditLog(ctx, "")
	// execute_code, then the execution's start and end, then its result
	if err != nil || len(recs) != 4 || !strings.HasPrefix(recs[3].Session, "mcp-key") || recs[1].Kind != "exec_start" ||
		recs[2].Kind != "exec_end" || recs[3].Kind != "executed" || recs[3].RunSeq != 4 {
		t.Fatalf("audit: %v %+v", err, recs)
	}
}

// TestMCPPanicIsAnError checks that a panicking handler answers with an
// internal error and leaves the server serving.
func TestMCPPanicIsAnError(t *testing.T) {
	srv, _, _ := newServer(t)
	mcp.AddTool(srv.MCP(), &mcp.Tool{Name: "boom"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		panic("boom")
	})
	ctx, sess := inMemory(t, srv)
	if _, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: "boom", Arguments: map[string]any{}}); err == nil || !strings.Contains(err.Error(), "internal error") {
		t.Fatalf("panicking tool: %v", err)
	}
	res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: "check_code", Arguments: map[string]any{"language": "python", "code": "print(1)"}})
	if err != nil || res.IsError {
		t.Fatalf("after the panic: %v %+v", err, res)
	}
}

// TestCheckCodeTakesAliases: check_code takes every name execute_code
// takes ("py", "js", "sh"), and refuses an unknown one as a tool error.
func TestCheckCodeTakesAliases(t *testing.T) {
	srv, _, _ := newServer(t)
	ctx, sess := inMemory(t, srv)
	for _, l := range []string{"py", "python3", "js", "node", "sh", "Python"} {
		res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: "check_code", Arguments: map[string]any{"language": l, "code": "x = 1"}})
		if err != nil || res.IsError {
			t.Errorf("check_code in %q: %v %+v", l, err, res)
		}
	}
	res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: "check_code", Arguments: map[string]any{"language": "cobol", "code": "x"}})
	if err == nil && !res.IsError {
		t.Errorf("check_code in cobol: %+v", res)
	}
}

// inMemory connects a client to srv over in-memory transports, for 30 s.
func inMemory(t *testing.T, srv *mcpserver.Server) (context.Context, *mcp.ClientSession) {
	t.Helper()
	return inMemoryFor(t, srv, 30*time.Second)
}

// inMemoryFor is inMemory for d; the session is closed at the test's end.
func inMemoryFor(t *testing.T, srv *mcpserver.Server, d time.Duration) (context.Context, *mcp.ClientSession) {
	t.Helper()
	st, ct := mcp.NewInMemoryTransports()
	go func() { _ = srv.Run(context.Background(), st) }()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	sess, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess.Close() })
	return ctx, sess
}
