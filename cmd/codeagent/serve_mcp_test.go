package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestServeMCPSharesTheQueue: an execution through /mcp of codeagent serve
// goes through the server's execution queue and is counted in its metrics
// like one of /v1/exec (it once went to the backend directly, past
// --workers and --queue, and codeagent_executions_total did not move).
func TestServeMCPSharesTheQueue(t *testing.T) {
	base, _, _ := startServe(t, "--no-token", "--data-dir", t.TempDir(), "--workers", "1", "--queue", "1")
	ctx, sess := connectServeMCP(t, base)
	res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: "execute_code",
		Arguments: map[string]any{"language": "python", "code": "print(6 * 7)"}})
	if err != nil || res.IsError {
		t.Fatalf("execute_code: %v %+v", err, res)
	}
	code, body, _ := call(t, "GET", base+"/metrics", "")
	if code != 200 || !strings.Contains(body, `codeagent_executions_total{source="mcp",status="ok"} 1`) ||
		!strings.Contains(body, "codeagent_exec_workers 1\n") || !strings.Contains(body, "codeagent_exec_queue_capacity 1\n") {
		t.Fatalf("metrics after an MCP execution: %d\n%s", code, body)
	}
	// A cell of the MCP session's kernel (keep_state) takes a worker slot
	// too, and is counted under its door.
	res, err = sess.CallTool(ctx, &mcp.CallToolParams{Name: "execute_code",
		Arguments: map[string]any{"language": "python", "code": "x = 6 * 7\nprint(x)", "keep_state": true}})
	if err != nil || res.IsError {
		t.Fatalf("execute_code with keep_state: %v %+v", err, res)
	}
	code, body, _ = call(t, "GET", base+"/metrics", "")
	if code != 200 || !strings.Contains(body, `codeagent_executions_total{source="mcp",status="ok"} 2`) {
		t.Fatalf("metrics after an MCP cell: %d\n%s", code, body)
	}
}

// connectServeMCP connects an MCP client to /mcp of the server at base
// (started with --no-token), for 60 s.
func connectServeMCP(t *testing.T, base string) (context.Context, *mcp.ClientSession) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	sess, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: base + "/mcp"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess.Close() })
	return ctx, sess
}
