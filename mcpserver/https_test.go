package mcpserver_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/codeagent/codeagent/app"
	"github.com/codeagent/codeagent/internal/pyindex"
	"github.com/codeagent/codeagent/internal/testca"
	"github.com/codeagent/codeagent/mcpserver"
	"github.com/codeagent/codeagent/sandbox/backends"
)

// execute_code installs from an index over HTTPS when the operator gave
// its authority (Config.EgressCACerts, mcp --ca-cert); without it the
// tool error says that the index could not be reached, and why.
func TestMCPDependenciesOverHTTPS(t *testing.T) {
	ca := testca.New(t, "codeagent mcp test CA")
	fn, data, err := pyindex.Wheel("tern", "1.0", map[string]string{"tern/__init__.py": "VALUE = 42\n"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ix := pyindex.NewTLS(t, ca.Certificate(t, "127.0.0.1"), pyindex.Dist{Project: "tern", Filename: fn, Data: data})
	sb, err := backends.Open("auto", backends.Options{})
	if err != nil {
		t.Fatalf("the sandbox cannot run here: %v", err)
	}
	defer sb.Close()
	call := func(cas []byte) *mcp.CallToolResult {
		srv, err := mcpserver.New(mcpserver.Config{WorkDir: t.TempDir(), EgressCeiling: []string{ix.Host()}, EgressCACerts: cas},
			mcpserver.Deps{Sandbox: sb, Envs: app.Envs(filepath.Join(t.TempDir(), "data"), sb, "", nil)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { srv.Close() })
		_, sess := inMemoryFor(t, srv, 2*time.Minute)
		res, err := sess.CallTool(context.Background(), &mcp.CallToolParams{Name: "execute_code", Arguments: map[string]any{
			"language": "python", "code": "import tern\nprint(tern.VALUE)\n",
			"dependencies": map[string]any{"python": []string{"tern==1.0"}, "index_url": ix.URL()}}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	text := func(res *mcp.CallToolResult) string {
		var b strings.Builder
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				b.WriteString(tc.Text)
			}
		}
		return b.String()
	}
	if res := call(nil); !res.IsError || !strings.Contains(text(res), "the index "+ix.URL()+" could not be reached: TLS failure") {
		t.Errorf("without the authority: %v %s", res.IsError, text(res))
	}
	if res := call(ca.PEM); res.IsError || !strings.Contains(text(res), "42") {
		t.Errorf("with the authority: %v %s", res.IsError, text(res))
	}
}
