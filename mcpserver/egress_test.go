package mcpserver_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/codeagent/codeagent/mcpserver"
	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/sandbox/backends"
)

// TestMCPAllowHostsWithinCeiling: execute_code reaches the hosts of its
// allow_hosts when the server's ceiling covers them, and is refused
// otherwise.
func TestMCPAllowHostsWithinCeiling(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "from upstream") }))
	defer up.Close()
	sb, err := backends.Open("auto", backends.Options{})
	if err != nil {
		t.Fatalf("the sandbox cannot run here: %v", err)
	}
	defer sb.Close()
	srv, err := mcpserver.New(mcpserver.Config{WorkDir: t.TempDir(), EgressCeiling: []string{"*.example.test"},
		EgressResolve: map[string]string{"data.example.test": strings.TrimPrefix(up.URL, "http://")}}, mcpserver.Deps{Sandbox: sb})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	ctx, sess := inMemoryFor(t, srv, 60*time.Second)
	code := "import urllib.request\nprint(urllib.request.urlopen('http://data.example.test/', timeout=10).read().decode())\n"
	call := func(allow []string) (*mcp.CallToolResult, sandbox.ResultJSON) {
		res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: "execute_code",
			Arguments: map[string]any{"language": "python", "code": code, "allow_hosts": allow}})
		if err != nil {
			t.Fatal(err)
		}
		var out sandbox.ResultJSON
		b, _ := json.Marshal(res.StructuredContent)
		_ = json.Unmarshal(b, &out)
		return res, out
	}
	res, out := call([]string{"data.example.test"})
	if res.IsError || out.Stdout != "from upstream\n" || out.Egress == nil || !out.Egress.Connections[0].Allowed {
		t.Fatalf("within the ceiling: %+v %+v", res, out)
	}
	res, _ = call([]string{"example.test"})
	if !res.IsError || len(res.Content) == 0 || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "wider than this server's egress ceiling") {
		t.Fatalf("beyond the ceiling: %+v", res)
	}
	res, out = call(nil)
	if res.IsError || out.Egress != nil || out.Status != "error" {
		t.Fatalf("no allow_hosts, no network: %+v %+v", res, out)
	}
}
