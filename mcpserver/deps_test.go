package mcpserver_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/codeagent/codeagent/app"
	"github.com/codeagent/codeagent/internal/pyindex"
	"github.com/codeagent/codeagent/llm"
	"github.com/codeagent/codeagent/llm/llmtest"
	"github.com/codeagent/codeagent/mcpserver"
	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/sandbox/backends"
)

// execute_code installs its dependencies from an index within the
// server's ceiling, refuses one beyond it and refuses them with
// keep_state; a server without a store of environments refuses them.
func TestMCPExecuteCodeDependencies(t *testing.T) {
	fn, data, err := pyindex.Wheel("seabird", "1.0", map[string]string{"seabird/__init__.py": "VALUE = 42\n"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ix := pyindex.New(t, pyindex.Dist{Project: "seabird", Filename: fn, Data: data})
	sb, err := backends.Open("auto", backends.Options{})
	if err != nil {
		t.Fatalf("the sandbox cannot run here: %v", err)
	}
	defer sb.Close()
	connect := func(envs *app.EnvStore) *mcp.ClientSession {
		srv, err := mcpserver.New(mcpserver.Config{WorkDir: t.TempDir(), EgressCeiling: []string{ix.Host()}},
			mcpserver.Deps{Sandbox: sb, Envs: envs})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { srv.Close() })
		_, sess := inMemoryFor(t, srv, 2*time.Minute)
		return sess
	}
	call := func(sess *mcp.ClientSession, args map[string]any) (*mcp.CallToolResult, sandbox.ResultJSON) {
		res, err := sess.CallTool(context.Background(), &mcp.CallToolParams{Name: "execute_code", Arguments: args})
		if err != nil {
			t.Fatal(err)
		}
		var out sandbox.ResultJSON
		b, _ := json.Marshal(res.StructuredContent)
		_ = json.Unmarshal(b, &out)
		return res, out
	}
	text := func(res *mcp.CallToolResult) string {
		if len(res.Content) == 0 {
			return ""
		}
		if tc, ok := res.Content[0].(*mcp.TextContent); ok {
			return tc.Text
		}
		return ""
	}
	sess := connect(app.Envs(filepath.Join(t.TempDir(), "data"), sb, "", nil))
	code := "import seabird\nprint(seabird.VALUE)\n"
	res, out := call(sess, map[string]any{"language": "python", "code": code,
		"dependencies": map[string]any{"python": []string{"seabird==1.0"}, "index_url": ix.URL()}})
	if res.IsError || strings.TrimSpace(out.Stdout) != "42" {
		t.Fatalf("with dependencies: %s %+v", text(res), out)
	}
	for _, c := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"python": []string{"seabird"}, "index_url": "http://127.0.0.1:1/simple/"}, "egress ceiling"},
		{map[string]any{"python": []string{"albatross"}, "index_url": ix.URL()}, "albatross"},
	} {
		res, _ := call(sess, map[string]any{"language": "python", "code": code, "dependencies": c.args})
		if !res.IsError || !strings.Contains(text(res), c.want) {
			t.Errorf("%v: %+v %s", c.args, res, text(res))
		}
	}
	res, _ = call(sess, map[string]any{"language": "python", "code": code, "keep_state": true,
		"dependencies": map[string]any{"python": []string{"seabird"}, "index_url": ix.URL()}})
	if !res.IsError || !strings.Contains(text(res), "keep_state") {
		t.Errorf("with keep_state: %s", text(res))
	}
	res, _ = call(connect(nil), map[string]any{"language": "python", "code": code,
		"dependencies": map[string]any{"python": []string{"seabird"}, "index_url": ix.URL()}})
	if !res.IsError || !strings.Contains(text(res), "installs none") {
		t.Errorf("a server without environments: %s", text(res))
	}
}

// run_task installs its dependencies before the first program, and every
// program of the run gets them.
func TestMCPRunTaskDependencies(t *testing.T) {
	fn, data, err := pyindex.Wheel("seabird", "1.0", map[string]string{"seabird/__init__.py": "VALUE = 42\n"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ix := pyindex.New(t, pyindex.Dist{Project: "seabird", Filename: fn, Data: data})
	sb, err := backends.Open("auto", backends.Options{})
	if err != nil {
		t.Fatalf("the sandbox cannot run here: %v", err)
	}
	defer sb.Close()
	model := llmtest.NewOpenAIServer(t, llmtest.Say("```python\nimport seabird\nprint(seabird.VALUE)\n```"))
	cfg := llmtest.Config(llm.ProviderOpenAI, model.BaseURL)
	srv, err := mcpserver.New(mcpserver.Config{WorkDir: t.TempDir(), EgressCeiling: []string{ix.Host()}},
		mcpserver.Deps{Sandbox: sb, Model: &cfg, Envs: app.Envs(filepath.Join(t.TempDir(), "data"), sb, "", nil)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	ctx, sess := inMemoryFor(t, srv, 2*time.Minute)
	res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: "run_task", Arguments: map[string]any{
		"task": "print the seabird value", "verify": false,
		"dependencies": map[string]any{"python": []string{"seabird==1.0"}, "index_url": ix.URL()}}})
	if err != nil {
		t.Fatal(err)
	}
	var out mcpserver.RunTaskOutput
	b, _ := json.Marshal(res.StructuredContent)
	_ = json.Unmarshal(b, &out)
	if res.IsError || !out.Success || !strings.Contains(out.Output, "42") {
		t.Fatalf("run_task with dependencies: %+v %+v", res, out)
	}
}
