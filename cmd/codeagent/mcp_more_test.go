package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestMCPManifestFiltersTools(t *testing.T) {
	m := filepath.Join(t.TempDir(), "agent.yaml")
	yaml := "agent:\n  tools:\n    - name: execute_python\n      timeout: 5\n  limits:\n    executions_per_minute: 1\n"
	if err := os.WriteFile(m, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	_, flags := modelServer(t)
	c := startMCP(t, append([]string{"--manifest", m}, flags...)...)
	res := c.call(t, "execute_code", map[string]any{"language": "bash", "code": "echo hi"}, nil)
	if text := toolText(res); !res.IsError || !strings.Contains(text, "execute_bash") {
		t.Fatalf("bash under a python-only manifest: %v %s", res.IsError, text)
	}
	res = c.call(t, "run_task", map[string]any{"task": "say hi", "language": "bash"}, nil)
	if text := toolText(res); !res.IsError || !strings.Contains(text, "execute_bash") {
		t.Fatalf("run_task in bash under a python-only manifest: %v %s", res.IsError, text)
	}
	// The manifest's timeout is a cap, and its rate limit applies.
	res = c.call(t, "execute_code", map[string]any{"language": "python", "code": "print(1)", "limits": map[string]any{"timeout_seconds": 10}}, nil)
	if text := toolText(res); !res.IsError || !strings.Contains(text, "maximum of 5") {
		t.Fatalf("over the manifest's timeout: %v %s", res.IsError, text)
	}
	var out struct{ Stdout string }
	if res = c.call(t, "execute_code", map[string]any{"language": "python", "code": "print(1)"}, &out); res.IsError || out.Stdout != "1\n" {
		t.Fatalf("python: %s", toolText(res))
	}
	res = c.call(t, "execute_code", map[string]any{"language": "python", "code": "print(2)"}, nil)
	if text := toolText(res); !res.IsError || !strings.Contains(text, "rate limit of 1") {
		t.Fatalf("second execution within the minute: %v %s", res.IsError, text)
	}
}

// TestMCPDisconnectKillsSandbox closes the server's standard input in the
// middle of an execution, as when the client dies (a polite client's Close
// would wait for its calls): the server must exit by itself at once, and the
// sandbox and the session's workspace go with it.
func TestMCPDisconnectKillsSandbox(t *testing.T) {
	mark, tmp, stderr := newMark(), t.TempDir(), &mcpLog{}
	cmd := exec.Command(mcpBinary(t), "mcp", "--data-dir", t.TempDir())
	cmd.Env, cmd.Stderr = append(os.Environ(), "TMPDIR="+tmp), stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Kill()
		if t.Failed() {
			t.Logf("server stderr:\n%s", stderr.String())
		}
	}()
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil)
	sess, err := client.Connect(context.Background(), &mcp.IOTransport{Reader: stdout, Writer: stdin}, nil)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		_, _ = sess.CallTool(context.Background(), &mcp.CallToolParams{Name: "execute_code",
			Arguments: map[string]any{"language": "bash", "code": sleeper(mark)}})
	}()
	waitFor(t, "the sandboxed program", 30*time.Second, func() bool { return len(markedProcesses(mark)) > 0 })
	if ws, _ := filepath.Glob(filepath.Join(tmp, "codeagent-mcp-*")); len(ws) != 1 {
		t.Fatalf("session workspaces: %v", ws)
	}
	_ = stdin.Close()
	start := time.Now()
	select {
	case err := <-exited:
		t.Logf("exited %v after the client left", time.Since(start))
		if err != nil {
			t.Fatalf("the server failed after its client left: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not exit after its client left")
	}
	if left := markedProcesses(mark); len(left) != 0 {
		t.Fatalf("sandboxed processes outlived the session: %v", left)
	}
	if ws, _ := filepath.Glob(filepath.Join(tmp, "codeagent-mcp-*")); len(ws) != 0 {
		t.Fatalf("session workspace left behind: %v", ws)
	}
}
