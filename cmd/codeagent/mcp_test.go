package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/codeagent/codeagent/llm/llmtest"
	"github.com/codeagent/codeagent/store"
)

// These tests drive the real binary over stdio with the SDK's client, a
// real sandbox and a fake model server.

var (
	mcpBinOnce sync.Once
	mcpBin     string
	mcpBinErr  error
)

// mcpBinary builds codeagent once per test process, into the test data
// directory that TestMain removes.
func mcpBinary(t testing.TB) string {
	t.Helper()
	mcpBinOnce.Do(func() {
		mcpBin = filepath.Join(os.Getenv("XDG_DATA_HOME"), "mcp-bin", "codeagent")
		out, err := exec.Command("go", "build", "-o", mcpBin, ".").CombinedOutput()
		if err != nil {
			mcpBinErr = err
			mcpBin = string(out)
		}
	})
	if mcpBinErr != nil {
		t.Fatalf("build: %v\n%s", mcpBinErr, mcpBin)
	}
	return mcpBin
}

// mcpClient is one `codeagent mcp` process and the client connected to it.
type mcpClient struct {
	*mcp.ClientSession
	stderr   *mcpLog
	tmp      string // the server's TMPDIR, where session workspaces live
	data     string
	mu       sync.Mutex
	progress []*mcp.ProgressNotificationParams
}

// mcpLog collects the server's stderr.
type mcpLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *mcpLog) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *mcpLog) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// startMCP starts `codeagent mcp args...` and connects a client to it.
func startMCP(t *testing.T, args ...string) *mcpClient {
	t.Helper()
	c := &mcpClient{stderr: &mcpLog{}, tmp: t.TempDir(), data: t.TempDir()}
	cmd := exec.Command(mcpBinary(t), append([]string{"mcp", "--data-dir", c.data}, args...)...)
	cmd.Env, cmd.Stderr = append(os.Environ(), "TMPDIR="+c.tmp, "CODEAGENT_DEBUG=1"), c.stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			c.mu.Lock()
			c.progress = append(c.progress, req.Params)
			c.mu.Unlock()
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sess, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 10 * time.Second}, nil)
	if err != nil {
		t.Fatalf("connect: %v\nstderr:\n%s", err, c.stderr.String())
	}
	c.ClientSession = sess
	t.Cleanup(func() {
		_ = sess.Close()
		if t.Failed() {
			t.Logf("server stderr:\n%s", c.stderr.String())
		}
	})
	return c
}

// call calls a tool and decodes its structured content into out.
func (c *mcpClient) call(t *testing.T, name string, args any, out any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := c.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if out != nil && res.StructuredContent != nil {
		b, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s: decode %s: %v", name, b, err)
		}
	}
	return res
}

func toolText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func newMark() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "mcpmark" + hex.EncodeToString(b[:])
}

// markedProcesses lists host processes whose environment has MCPTEST_MARK=mark.
func markedProcesses(mark string) []string {
	entries, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range entries {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err == nil && bytes.Contains(env, []byte("MCPTEST_MARK="+mark)) {
			out = append(out, e.Name())
		}
	}
	return out
}

func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(d); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// sleeper is a bash program that waits with the marker in its environment.
func sleeper(mark string) string { return "export MCPTEST_MARK=" + mark + "\nsleep 60\n" }

func TestMCPListToolsAndSchemas(t *testing.T) {
	_, flags := modelServer(t)
	c := startMCP(t, flags...)
	res, err := c.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]string{ // tool -> property -> type, "!" when required
		"execute_code": {"language": "!string", "code": "!string", "files": "object", "limits": "object", "stdin": "string"},
		"check_code":   {"language": "!string", "code": "!string"},
		"run_task":     {"task": "!string", "files": "object", "max_iterations": "integer", "tests": "string", "language": "string"},
		"list_files":   {},
		"read_file":    {"path": "!string"},
		"write_file":   {"name": "!string", "content": "string", "content_base64": "string"},
	}
	got := map[string]bool{}
	for _, tool := range res.Tools {
		got[tool.Name] = true
		var sc struct {
			Type       string                     `json:"type"`
			Required   []string                   `json:"required"`
			Properties map[string]json.RawMessage `json:"properties"`
		}
		b, _ := json.Marshal(tool.InputSchema)
		if err := json.Unmarshal(b, &sc); err != nil || sc.Type != "object" {
			t.Errorf("%s: input schema %s", tool.Name, b)
			continue
		}
		if tool.OutputSchema == nil || tool.Description == "" {
			t.Errorf("%s: no output schema or description", tool.Name)
		}
		for prop, typ := range want[tool.Name] {
			typ, required := strings.CutPrefix(typ, "!")
			if required != slices.Contains(sc.Required, prop) {
				t.Errorf("%s: %s required %v, want %v: %s", tool.Name, prop, !required, required, b)
			}
			if !strings.Contains(string(sc.Properties[prop]), `"`+typ+`"`) {
				t.Errorf("%s: %s is not a %s: %s", tool.Name, prop, typ, sc.Properties[prop])
			}
		}
	}
	for name := range want {
		if !got[name] {
			t.Errorf("tool %s is not offered (got %v)", name, got)
		}
	}
}

const mcpPlot = `import matplotlib.pyplot as plt
with open("numbers.txt") as f:
    ys = [int(x) for x in f.read().split()]
plt.plot(ys)
plt.savefig("plot.png")
print("sum", sum(ys))
`

func TestMCPExecuteCodeWithFilesAndImage(t *testing.T) {
	c := startMCP(t)
	var w struct{ Path string }
	if res := c.call(t, "write_file", map[string]any{"name": "numbers.txt", "content": "3 1 4 1 5"}, &w); res.IsError || w.Path != "numbers.txt" {
		t.Fatalf("write_file: %s", toolText(res))
	}
	var out struct {
		Status   string `json:"status"`
		ExitCode int    `json:"exit_code"`
		Stdout   string `json:"stdout"`
		Files    []struct{ Path, Change string }
		Images   []string
	}
	res := c.call(t, "execute_code", map[string]any{"language": "python", "code": mcpPlot,
		"files": map[string]string{"extra.txt": "x"}, "limits": map[string]any{"timeout_seconds": 30}}, &out)
	if res.IsError || out.Status != "ok" || out.ExitCode != 0 || out.Stdout != "sum 14\n" {
		t.Fatalf("execute_code: %+v\n%s", out, toolText(res))
	}
	if len(out.Images) != 1 || out.Images[0] != "plot.png" || len(out.Files) != 1 || out.Files[0].Path != "plot.png" {
		t.Fatalf("files %+v images %v", out.Files, out.Images)
	}
	var img *mcp.ImageContent
	for _, ct := range res.Content {
		if ic, ok := ct.(*mcp.ImageContent); ok {
			img = ic
		}
	}
	if img == nil || img.MIMEType != "image/png" || !bytes.HasPrefix(img.Data, []byte("\x89PNG\r\n\x1a\n")) {
		t.Fatalf("no PNG image content in %d content items", len(res.Content))
	}

	// The workspace persists between calls of the session.
	var list struct{ Files []struct{ Path string } }
	c.call(t, "list_files", map[string]any{}, &list)
	var names []string
	for _, f := range list.Files {
		names = append(names, f.Path)
	}
	if strings.Join(names, ",") != "extra.txt,numbers.txt,plot.png" {
		t.Fatalf("list_files: %v", names)
	}
	var rd struct {
		Content       string `json:"content"`
		ContentBase64 string `json:"content_base64"`
	}
	if res := c.call(t, "read_file", map[string]any{"path": "numbers.txt"}, &rd); res.IsError || rd.Content != "3 1 4 1 5" {
		t.Fatalf("read_file: %+v %s", rd, toolText(res))
	}
	if res := c.call(t, "read_file", map[string]any{"path": "plot.png"}, &rd); res.IsError || rd.ContentBase64 == "" || len(res.Content) != 2 {
		t.Fatalf("read_file png: error %v, %d bytes of base64, %d content items", res.IsError, len(rd.ContentBase64), len(res.Content))
	}

	// The executions are in the audit log, under the session's name.
	_ = c.Close()
	st, err := store.Open(context.Background(), filepath.Join(c.data, "codeagent.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	recs, err := st.AuditLog(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, r := range recs {
		if strings.HasPrefix(r.Session, "mcp-") {
			kinds = append(kinds, r.Kind)
		}
	}
	if strings.Join(kinds, ",") != "execute_code,exec_start,exec_end,executed" {
		t.Fatalf("audit records: %v", kinds)
	}
	entries, _ := filepath.Glob(filepath.Join(c.tmp, "codeagent-mcp-*"))
	if len(entries) != 0 {
		t.Fatalf("session workspace left behind: %v", entries)
	}
}

func TestMCPCheckCode(t *testing.T) {
	c := startMCP(t)
	var out struct {
		Safe     bool
		Findings []struct{ Rule, Message string }
	}
	c.call(t, "check_code", map[string]any{"language": "python", "code": "x = '1+1'\nprint(eval(x))\n"}, &out)
	if out.Safe || len(out.Findings) == 0 || out.Findings[0].Rule != "forbidden-builtin" {
		t.Fatalf("eval: %+v", out)
	}
	out.Findings = nil
	c.call(t, "check_code", map[string]any{"language": "python", "code": "import json\nprint(json.dumps({'a': 1}))\n"}, &out)
	if !out.Safe || len(out.Findings) != 0 {
		t.Fatalf("clean code: %+v", out)
	}
}

func TestMCPRunTaskWithProgress(t *testing.T) {
	_, flags := modelServer(t, pyAnswer("print('the answer is', 6 * 7)\n"), llmtest.Say(`{"task_complete": true, "missing": ""}`))
	c := startMCP(t, flags...)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := c.CallTool(ctx, &mcp.CallToolParams{Name: "run_task", Meta: mcp.Meta{"progressToken": "tok-1"},
		Arguments: map[string]any{"task": "print the answer", "files": map[string]string{"in.txt": "42"}}})
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Success  bool
		Attempts int
		Code     string
		Output   string
	}
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &out); err != nil || res.IsError || !out.Success || out.Attempts != 1 || out.Output != "the answer is 42\n" ||
		!strings.Contains(out.Code, "6 * 7") {
		t.Fatalf("run_task: %s", b)
	}
	want := []string{"attempt_start", "generated", "checked", "executed", "verified", "done"}
	var got []string
	waitFor(t, "the progress notifications", 5*time.Second, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		got = got[:0]
		for i, p := range c.progress {
			if p.ProgressToken != "tok-1" || p.Progress != float64(i+1) || p.Message == "" {
				t.Fatalf("progress %d: %+v", i, p)
			}
			got = append(got, p.Meta["codeagent/event"].(string))
		}
		return len(got) >= len(want)
	})
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("progress events %v, want %v", got, want)
	}
}

func TestMCPCancelRunTask(t *testing.T) {
	mark := newMark()
	_, flags := modelServer(t, llmtest.Say("```bash\n"+sleeper(mark)+"```"))
	c := startMCP(t, flags...)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := c.CallTool(ctx, &mcp.CallToolParams{Name: "run_task",
			Arguments: map[string]any{"task": "wait a minute", "language": "bash"}})
		errc <- err
	}()
	waitFor(t, "the sandboxed program", 30*time.Second, func() bool { return len(markedProcesses(mark)) > 0 })
	start := time.Now()
	cancel()
	select {
	case err := <-errc:
		if err == nil {
			t.Fatal("a cancelled call returned no error")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the cancelled call did not return")
	}
	waitFor(t, "the sandbox to be gone", 5*time.Second, func() bool { return len(markedProcesses(mark)) == 0 })
	t.Logf("cancelled in %v", time.Since(start))
	var ok struct{ Safe bool }
	if c.call(t, "check_code", map[string]any{"language": "bash", "code": "echo hi"}, &ok); !ok.Safe {
		t.Fatal("the server is not usable after a cancelled run")
	}
}

func TestMCPBadArguments(t *testing.T) {
	c := startMCP(t)
	cases := []struct {
		tool string
		args map[string]any
		want string
	}{
		{"execute_code", map[string]any{"language": "cobol", "code": "DISPLAY 1"}, "unknown language"},
		{"execute_code", map[string]any{"language": "python", "code": strings.Repeat("#", 1<<20+1)}, "more than 1 MiB"},
		{"execute_code", map[string]any{"language": "python"}, "code"},
		{"execute_code", map[string]any{"language": "python", "code": "print(1)", "files": map[string]string{"../x": "y"}}, "file name"},
		{"execute_code", map[string]any{"language": "python", "code": "print(1)", "limits": map[string]any{"timeout_seconds": 3600}}, "maximum"},
		{"execute_code", map[string]any{"language": "python", "code": "print(1)", "limits": map[string]any{"memory_mb": -1}}, "minimum"},
		{"write_file", map[string]any{"name": "../x", "content": "y"}, "file name"},
		{"write_file", map[string]any{"name": "x", "content_base64": "!!"}, "content_base64"},
		{"read_file", map[string]any{"path": "../etc/passwd"}, "invalid path"},
		{"read_file", map[string]any{"path": "missing.txt"}, "no such file"},
		{"check_code", map[string]any{"language": "cobol", "code": "x"}, "language"},
	}
	for _, tc := range cases {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		res, err := c.CallTool(ctx, &mcp.CallToolParams{Name: tc.tool, Arguments: tc.args})
		cancel()
		if err != nil {
			t.Errorf("%s %v: protocol error %v, want a tool error", tc.tool, tc.args["code"] != nil, err)
			continue
		}
		if text := toolText(res); !res.IsError || !strings.Contains(text, tc.want) {
			t.Errorf("%s: error %v, %.200s; want %q", tc.tool, res.IsError, text, tc.want)
		}
	}
	if _, err := c.CallTool(context.Background(), &mcp.CallToolParams{Name: "no_such_tool"}); err == nil {
		t.Error("an unknown tool gave no error")
	}
	var out struct{ Stdout string }
	if c.call(t, "execute_code", map[string]any{"language": "bash", "code": "echo alive"}, &out); out.Stdout != "alive\n" {
		t.Fatalf("after bad arguments: %+v", out)
	}
}
