package mcpserver_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/codeagent/codeagent/mcpserver"
	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/sandbox/backends"
	"github.com/codeagent/codeagent/workspace"
)

// The sessions' work directory passes through a link that a real program
// planted in an earlier run's workspace: every call that needs a workspace
// is refused, and nothing lands in the host directory it points to.
func TestMCPWorkDirThroughPlantedLink(t *testing.T) {
	sb, err := backends.Open("auto", backends.Options{})
	if err != nil {
		t.Fatalf("the sandbox cannot run here (see codeagent doctor): %v", err)
	}
	defer sb.Close()
	host := filepath.Join(t.TempDir(), "host")
	if err := os.Mkdir(host, 0o700); err != nil {
		t.Fatal(err)
	}
	ws, err := workspace.New(filepath.Join(t.TempDir(), "w"))
	if err != nil {
		t.Fatal(err)
	}
	plant := fmt.Sprintf("import os\nos.symlink(%q, 'tmp')\n", host)
	res, err := sb.Run(context.Background(), sandbox.Spec{Command: []string{"python3", "/code/p.py"}, Workspace: ws.Dir,
		Files: []sandbox.File{{Path: "/code/p.py", Data: []byte(plant)}}, Limits: sandbox.DefaultLimits()})
	if err != nil || res.Status != sandbox.StatusOK {
		t.Fatalf("plant: %v %v %s", err, res.Status, res.Stderr)
	}
	before, _ := os.Stat(host)

	srv, err := mcpserver.New(mcpserver.Config{WorkDir: filepath.Join(ws.Dir, "tmp")}, mcpserver.Deps{Sandbox: sb})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	ctx, sess := inMemoryFor(t, srv, 60*time.Second)
	for tool, args := range map[string]map[string]any{
		"execute_code": {"language": "python", "code": "open('authorized_keys', 'w').write('attacker')"},
		"write_file":   {"name": "authorized_keys", "content": "attacker"},
		"list_files":   {},
	} {
		r, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
		var text strings.Builder
		for _, c := range r.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				text.WriteString(tc.Text)
			}
		}
		if !r.IsError || !strings.Contains(text.String(), "symbolic link") {
			t.Errorf("%s: error %v, %.300s; want a refusal naming the link", tool, r.IsError, text.String())
		}
	}
	entries, _ := os.ReadDir(host)
	after, _ := os.Stat(host)
	if len(entries) != 0 || !after.ModTime().Equal(before.ModTime()) {
		t.Errorf("the host directory changed: %v", entries)
	}
}
