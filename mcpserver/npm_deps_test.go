package mcpserver_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/codeagent/codeagent/app"
	"github.com/codeagent/codeagent/internal/npmreg"
	"github.com/codeagent/codeagent/mcpserver"
	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/sandbox/backends"
)

// execute_code installs a JavaScript program's npm packages from a
// registry within the server's ceiling and refuses them with keep_state.
func TestMCPExecuteCodeJavaScriptDependencies(t *testing.T) {
	reg := npmreg.New(t, npmreg.Package{Name: "kiwi", Version: "1.0.0", Files: map[string]string{"index.js": "exports.x = 42\n"}})
	sb, err := backends.Open("auto", backends.Options{})
	if err != nil {
		t.Fatalf("the sandbox cannot run here: %v", err)
	}
	defer sb.Close()
	srv, err := mcpserver.New(mcpserver.Config{WorkDir: t.TempDir(), EgressCeiling: []string{reg.Host()}},
		mcpserver.Deps{Sandbox: sb, Envs: app.Envs(filepath.Join(t.TempDir(), "data"), sb, "", nil)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	ctx, sess := inMemoryFor(t, srv, 2*time.Minute)
	deps := map[string]any{"javascript": []string{"kiwi@1.0.0"}, "npm_registry": reg.URL()}
	res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: "execute_code", Arguments: map[string]any{
		"language": "javascript", "code": "console.log(require('kiwi').x)", "dependencies": deps}})
	if err != nil {
		t.Fatal(err)
	}
	var out sandbox.ResultJSON
	b, _ := json.Marshal(res.StructuredContent)
	_ = json.Unmarshal(b, &out)
	if res.IsError || strings.TrimSpace(out.Stdout) != "42" {
		t.Fatalf("with dependencies: %+v %+v", res.Content, out)
	}
	res, err = sess.CallTool(ctx, &mcp.CallToolParams{Name: "execute_code", Arguments: map[string]any{
		"language": "javascript", "code": "1", "keep_state": true, "dependencies": deps}})
	if err != nil || !res.IsError {
		t.Errorf("with keep_state: %v %+v", err, res)
	}
}
