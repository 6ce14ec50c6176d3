package server

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/codeagent/codeagent/mcpserver"
)

// multipartFiles is one multipart body of n files named prefix0000.csv...
func multipartFiles(t *testing.T, prefix string, n int, content string) (io.Reader, string) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for i := 0; i < n; i++ {
		pw, err := mw.CreateFormFile("file", fmt.Sprintf("%s%04d.csv", prefix, i))
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(pw, content)
	}
	mw.Close()
	return &buf, mw.FormDataContentType()
}

// workspaceEntries lists everything in a session's workspace, temporary
// upload files included.
func workspaceEntries(t *testing.T, dir string) []string {
	t.Helper()
	var names []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && p != dir {
			rel, _ := filepath.Rel(dir, p)
			names = append(names, rel)
		}
		return nil
	})
	return names
}

// TestServeUploadFloodRefused sends the flood of the report: one small
// multipart request with 3,000 files. It is refused whole, and nothing is
// left in the workspace; the cap itself (100 by default) is accepted.
func TestServeUploadFloodRefused(t *testing.T) {
	ts := newTestServer(t, testOptions{noModel: true})
	s := ts.createSession(t, "", "flood")
	ws := ts.srv.workspaceDir(Anonymous, s.ID)
	path := "/v1/sessions/" + s.ID + "/files"
	body, ct := multipartFiles(t, "f", 3000, "a,b\n1,2\n")
	resp, b := ts.do(t, "POST", path, "", body, "Content-Type", ct)
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(b), "at most 100 files") {
		t.Errorf("flood: %d %s", resp.StatusCode, b)
	}
	if got := workspaceEntries(t, ws); len(got) != 0 {
		t.Errorf("the flood stored %d entries: %v...", len(got), got[:min(5, len(got))])
	}
	body, ct = multipartFiles(t, "g", 101, "x")
	if resp, b := ts.do(t, "POST", path, "", body, "Content-Type", ct); resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("101 files: %d %s", resp.StatusCode, b)
	}
	body, ct = multipartFiles(t, "h", 100, "x")
	if resp, b := ts.do(t, "POST", path, "", body, "Content-Type", ct); resp.StatusCode != http.StatusCreated {
		t.Errorf("100 files: %d %s", resp.StatusCode, b)
	}
	if got := workspaceEntries(t, ws); len(got) != 100 {
		t.Errorf("%d entries, want 100", len(got))
	}
}

// TestServeSessionQuota fills a session to its quota of files and bytes
// through every way of storing a file (multipart, raw PUT, many at once,
// what a program left) and checks that one more is refused with 413, that
// a refused upload stores nothing and keeps the old content, and that
// replacing a file or freeing room is allowed.
func TestServeSessionQuota(t *testing.T) {
	ts := newTestServer(t, testOptions{noModel: true, cfg: Config{SessionMaxFiles: 3, SessionMaxBytes: 100}})
	s := ts.createSession(t, "", "quota")
	ws := ts.srv.workspaceDir(Anonymous, s.ID)
	base := "/v1/sessions/" + s.ID + "/files/"
	put := func(name, data string, want int) {
		t.Helper()
		resp, b := ts.do(t, "PUT", base+name, "", strings.NewReader(data))
		if resp.StatusCode != want {
			t.Errorf("PUT %s (%d bytes): %d %s, want %d", name, len(data), resp.StatusCode, b, want)
		}
	}
	ten := strings.Repeat("x", 10)
	if resp, b := ts.upload(t, "", s.ID, map[string]string{"a.csv": ten, "b.csv": ten, "c.csv": ten}); resp.StatusCode != 201 {
		t.Fatalf("three files: %d %s", resp.StatusCode, b)
	}
	resp, b := ts.upload(t, "", s.ID, map[string]string{"d.csv": ten})
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(b), "3 files") {
		t.Errorf("a fourth file (multipart): %d %s", resp.StatusCode, b)
	}
	put("d.csv", ten, http.StatusRequestEntityTooLarge)
	put("a.csv", ten, http.StatusCreated) // replacing adds no file
	// Bytes: 80 + 10 + 10 is the quota; 81 is over and keeps the old a.csv.
	put("a.csv", strings.Repeat("y", 80), http.StatusCreated)
	put("a.csv", strings.Repeat("z", 81), http.StatusRequestEntityTooLarge)
	if got, _ := os.ReadFile(filepath.Join(ws, "a.csv")); string(got) != strings.Repeat("y", 80) {
		t.Errorf("a refused upload changed a.csv: %q", got)
	}
	resp, b = ts.upload(t, "", s.ID, map[string]string{"b.csv": ten, "c.csv": ten + "!"})
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(b), "100 bytes") {
		t.Errorf("over the byte quota (multipart): %d %s", resp.StatusCode, b)
	}
	if got, _ := os.ReadFile(filepath.Join(ws, "c.csv")); string(got) != ten {
		t.Errorf("a refused multipart upload changed c.csv: %q", got)
	}
	if resp, _ := ts.do(t, "DELETE", base+"c.csv", "", nil); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("delete: %d", resp.StatusCode)
	}
	put("d.csv", ten, http.StatusCreated)
	// What a program left counts too.
	if resp, _ := ts.do(t, "DELETE", base+"d.csv", "", nil); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("delete: %d", resp.StatusCode)
	}
	if err := os.Mkdir(filepath.Join(ws, "out"), 0o755); err != nil {
		t.Fatal(err)
	}
	put("e.csv", ten, http.StatusRequestEntityTooLarge)
	if got := workspaceEntries(t, ws); strings.Join(got, ",") != "a.csv,b.csv,out" {
		t.Errorf("workspace %v", got)
	}
	os.Remove(filepath.Join(ws, "out"))

	// Many uploads at once cannot race past the quota: 2 free places, 20 tries.
	if resp, _ := ts.do(t, "DELETE", base+"b.csv", "", nil); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("delete: %d", resp.StatusCode)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[int]int{}
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, _ := ts.do(t, "PUT", fmt.Sprintf("%sp%02d.csv", base, i), "", strings.NewReader("1"))
			mu.Lock()
			codes[resp.StatusCode]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	if codes[201] != 2 || codes[413] != 18 || len(workspaceEntries(t, ws)) != 3 {
		t.Errorf("concurrent uploads: %v, workspace %v", codes, workspaceEntries(t, ws))
	}
}

// TestServeMCPWriteFileQuota writes files through /mcp of the real server
// until the MCP session's workspace is at its quota: one more file, or a
// file over the byte quota, is refused; replacing one is not.
func TestServeMCPWriteFileQuota(t *testing.T) {
	ts := newTestServer(t, testOptions{noModel: true, mcp: true, mcpCfg: mcpserver.Config{SessionMaxFiles: 2, SessionMaxBytes: 100}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sess, err := connectMCP(ctx, ts.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	write := func(name, content string) (bool, string) {
		t.Helper()
		res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: "write_file", Arguments: map[string]any{"name": name, "content": content}})
		if err != nil {
			t.Fatalf("write_file %s: %v", name, err)
		}
		var text string
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				text += tc.Text
			}
		}
		return !res.IsError, text
	}
	for _, c := range []struct {
		name, content string
		ok            bool
		msg           string
	}{
		{"x.txt", "1", true, ""},
		{"y.txt", "2", true, ""},
		{"z.txt", "3", false, "2 files"},
		{"x.txt", strings.Repeat("a", 99), true, ""}, // replacing: 99 + 1
		{"x.txt", strings.Repeat("a", 100), false, "100 bytes"},
	} {
		if ok, text := write(c.name, c.content); ok != c.ok || !strings.Contains(text, c.msg) {
			t.Errorf("write_file %s (%d bytes): ok %v %q, want %v %q", c.name, len(c.content), ok, text, c.ok, c.msg)
		}
	}
	res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: "execute_code", Arguments: map[string]any{"language": "bash",
		"code": "ls", "files": map[string]any{"w.txt": "4"}}})
	if err != nil || !res.IsError {
		t.Errorf("execute_code with one file more: %v %+v", err, res)
	}
}
