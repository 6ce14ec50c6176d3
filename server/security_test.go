package server

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

const (
	aliceToken = "alice-token-0123456789abcdef"
	bobToken   = "bob-token-0123456789abcdef00"
)

var twoKeys = Keys{{Name: "alice", Token: aliceToken}, {Name: "bob", Token: bobToken}}

func TestServeAuthAndKeyIsolation(t *testing.T) {
	ts := newTestServer(t, testOptions{cfg: Config{Keys: twoKeys}, noModel: true})
	for _, tok := range []string{"", "wrong-token-0123456789abcdef", aliceToken + "x", strings.ToUpper(aliceToken)} {
		resp, _ := ts.do(t, "GET", "/v1/sessions", tok, nil)
		if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") == "" {
			t.Errorf("token %q: status %d", tok, resp.StatusCode)
		}
	}
	if resp, _ := ts.do(t, "GET", "/metrics", "", nil); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("metrics without a key: %d", resp.StatusCode)
	}
	if resp, _ := ts.do(t, "GET", "/v1/health", "", nil); resp.StatusCode != 200 {
		t.Errorf("health without a key: %d", resp.StatusCode)
	}
	a := ts.createSession(t, aliceToken, "private")
	if resp, b := ts.upload(t, aliceToken, a.ID, map[string]string{"secret.csv": "a,b\n1,2\n"}); resp.StatusCode != 201 {
		t.Fatalf("upload: %d %s", resp.StatusCode, b)
	}
	// Names are per key: bob may use the same one; alice may not twice.
	b := ts.createSession(t, bobToken, "private")
	ts.json(t, "POST", "/v1/sessions", aliceToken, map[string]string{"name": "private"}, http.StatusConflict, nil)

	var list struct{ Sessions []sessionJSON }
	ts.json(t, "GET", "/v1/sessions", bobToken, nil, 200, &list)
	if len(list.Sessions) != 1 || list.Sessions[0].ID != b.ID {
		t.Fatalf("bob sees %+v", list.Sessions)
	}
	for _, c := range []struct{ method, path string }{
		{"GET", "/v1/sessions/" + a.ID},
		{"DELETE", "/v1/sessions/" + a.ID},
		{"GET", "/v1/sessions/" + a.ID + "/files"},
		{"GET", "/v1/sessions/" + a.ID + "/files/secret.csv"},
		{"DELETE", "/v1/sessions/" + a.ID + "/files/secret.csv"},
		{"PUT", "/v1/sessions/" + a.ID + "/files/evil.csv"},
		{"POST", "/v1/sessions/" + a.ID + "/runs"},
	} {
		var body io.Reader
		if c.method == "POST" || c.method == "PUT" {
			body = strings.NewReader(`{"task":"steal"}`)
		}
		resp, out := ts.do(t, c.method, c.path, bobToken, body, "Content-Type", "application/json")
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("bob %s %s: %d %s", c.method, c.path, resp.StatusCode, out)
		}
	}
	var run runJSON
	ts.json(t, "POST", "/v1/sessions/"+a.ID+"/runs", aliceToken, map[string]any{"task": "x"}, http.StatusAccepted, &run)
	for _, p := range []string{"/v1/runs/" + run.ID, "/v1/runs/" + run.ID + "/events"} {
		if resp, _ := ts.do(t, "GET", p, bobToken, nil); resp.StatusCode != http.StatusNotFound {
			t.Errorf("bob GET %s: %d", p, resp.StatusCode)
		}
	}
	if resp, _ := ts.do(t, "POST", "/v1/runs/"+run.ID+"/cancel", bobToken, nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("bob cancels alice's run: %d", resp.StatusCode)
	}
	ts.waitRun(t, aliceToken, run.ID)
	resp, body := ts.do(t, "GET", "/v1/sessions/"+a.ID+"/files/secret.csv", aliceToken, nil)
	if resp.StatusCode != 200 || string(body) != "a,b\n1,2\n" {
		t.Errorf("alice's own file: %d %q", resp.StatusCode, body)
	}
}

func TestServeFileNamesAndTraversal(t *testing.T) {
	ts := newTestServer(t, testOptions{cfg: Config{MaxUpload: 1024}})
	s := ts.createSession(t, "", "ws")
	base := "/v1/sessions/" + s.ID + "/files/"
	for _, name := range []string{"..", ".hidden", "-rf", "a%2Fb", "..%2F..%2Fcodeagent.db", "%2Fetc%2Fpasswd",
		"x%00y", "x%0Ay", "x%1B", "a%5Cb", strings.Repeat("n", 300)} {
		resp, b := ts.do(t, "PUT", base+name, "", strings.NewReader("data"))
		if resp.StatusCode != http.StatusBadRequest && resp.StatusCode != http.StatusNotFound {
			t.Errorf("PUT %q: %d %s", name, resp.StatusCode, b)
		}
	}
	for _, name := range []string{"../../evil.csv", "/etc/evil.csv", "sub/evil.csv", "ok\x01.csv", ".."} {
		if resp, b := ts.upload(t, "", s.ID, map[string]string{name: "x"}); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("multipart %q: %d %s", name, resp.StatusCode, b)
		}
	}
	for _, p := range []string{"..%2F..%2F..%2Fcodeagent.db", "a/../../x", "%2E%2E/x", "x%00", "a//b"} {
		for _, m := range []string{"GET", "DELETE"} {
			resp, b := ts.do(t, m, base+p, "", nil)
			if resp.StatusCode != http.StatusBadRequest && resp.StatusCode != http.StatusNotFound {
				t.Errorf("%s %q: %d %s", m, p, resp.StatusCode, b)
			}
		}
	}
	// A link a program left in the workspace is never followed.
	ws := ts.srv.workspaceDir(Anonymous, s.ID)
	if err := os.Symlink("/etc/passwd", filepath.Join(ws, "link.png")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc", filepath.Join(ws, "dir")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"link.png", "dir/passwd"} {
		if resp, b := ts.do(t, "GET", base+p, "", nil); resp.StatusCode != http.StatusNotFound || bytes.Contains(b, []byte("root:")) {
			t.Errorf("GET %s: %d %q", p, resp.StatusCode, b)
		}
	}
	if resp, _ := ts.do(t, "PUT", base+"link.png", "", strings.NewReader("new")); resp.StatusCode != 201 {
		t.Errorf("replacing a link: %d", resp.StatusCode)
	}
	if b, _ := os.ReadFile("/etc/passwd"); bytes.Equal(b, []byte("new")) {
		t.Fatal("an upload wrote through a link")
	}
	// Oversized uploads are refused and leave nothing behind.
	big := strings.Repeat("x", 2048)
	if resp, _ := ts.do(t, "PUT", base+"big.csv", "", strings.NewReader(big)); resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("oversized raw upload: %d", resp.StatusCode)
	}
	if resp, _ := ts.upload(t, "", s.ID, map[string]string{"big.csv": big}); resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("oversized multipart upload: %d", resp.StatusCode)
	}
	entries, _ := os.ReadDir(ws)
	for _, e := range entries {
		if e.Name() != "link.png" && e.Name() != "dir" {
			t.Errorf("left in the workspace: %s", e.Name())
		}
	}
	// SVG is served inline but sandboxed; other types are downloads.
	if resp, _ := ts.do(t, "PUT", base+"x.svg", "", strings.NewReader(`<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>`)); resp.StatusCode != 201 {
		t.Fatal("svg upload")
	}
	resp, _ := ts.do(t, "GET", base+"x.svg", "", nil)
	if resp.Header.Get("Content-Type") != "image/svg+xml" || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "sandbox") {
		t.Errorf("svg headers: %v", resp.Header)
	}
	if resp, _ := ts.do(t, "GET", base+"x.svg?download=1", "", nil); !strings.HasPrefix(resp.Header.Get("Content-Disposition"), "attachment") {
		t.Errorf("svg download: %v", resp.Header)
	}
}

func TestServeMalformedRequests(t *testing.T) {
	ts := newTestServer(t, testOptions{cfg: Config{MaxBody: 256}})
	s := ts.createSession(t, "", "m")
	for _, c := range []struct {
		method, path, body, ct string
		want                   int
	}{
		{"POST", "/v1/sessions", `{"name": "` + strings.Repeat("a", 400) + `"}`, "application/json", 413},
		{"POST", "/v1/sessions", `{"name": `, "application/json", 400},
		{"POST", "/v1/sessions", `{"name": "x"} {"name": "y"}`, "application/json", 400},
		{"POST", "/v1/sessions", `{"name": "../x"}`, "application/json", 400},
		{"POST", "/v1/sessions", `[1,2]`, "application/json", 400},
		{"POST", "/v1/sessions/" + s.ID + "/runs", `{"task": ""}`, "application/json", 400},
		{"POST", "/v1/sessions/" + s.ID + "/runs", `{"task": "x", "language": "cobol"}`, "application/json", 400},
		{"POST", "/v1/sessions/" + s.ID + "/files", `not multipart`, "text/plain", 415},
		{"POST", "/v1/exec", `{"language": "bash", "code": "true"}`, "text/plain", 415},
		{"POST", "/v1/sessions/" + s.ID + "/files", "--b\r\nbroken", "multipart/form-data; boundary=b", 400},
		{"GET", "/v1/sessions/not-an-id", "", "", 404},
		{"GET", "/v1/runs/%00", "", "", 404},
		{"POST", "/v1/exec", `{"language": 1}`, "application/json", 400},
		{"DELETE", "/v1/health", "", "", 404},
	} {
		resp, b := ts.do(t, c.method, c.path, "", strings.NewReader(c.body), "Content-Type", c.ct)
		if resp.StatusCode != c.want || !strings.Contains(string(b), `"error"`) {
			t.Errorf("%s %s %q: %d %s, want %d", c.method, c.path, c.body, resp.StatusCode, b, c.want)
		}
	}
}

func TestServePanicBecomes500(t *testing.T) {
	ts := newTestServer(t, testOptions{noModel: true})
	h := ts.srv.wrap(route{kind: kindPlain}, func(http.ResponseWriter, *http.Request) { panic("boom") })
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "http://127.0.0.1:8080/x", nil)
	req = req.WithContext(context.WithValue(req.Context(), http.LocalAddrContextKey, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}))
	h.ServeHTTP(rec, req)
	if rec.Code != 500 || !strings.Contains(rec.Body.String(), "internal") {
		t.Errorf("panic: %d %s", rec.Code, rec.Body)
	}
}

func TestServeRateLimitAndQueue(t *testing.T) {
	ts := newTestServer(t, testOptions{cfg: Config{Keys: twoKeys, RatePerSecond: 0.5, RateBurst: 3, Workers: 1, QueueLength: 1}})
	codes := map[int]int{}
	for i := 0; i < 5; i++ {
		resp, _ := ts.do(t, "GET", "/v1/sessions", aliceToken, nil)
		codes[resp.StatusCode]++
		if resp.StatusCode == 429 && resp.Header.Get("Retry-After") == "" {
			t.Error("429 without Retry-After")
		}
	}
	if codes[200] != 3 || codes[429] != 2 {
		t.Errorf("rate limit: %v", codes)
	}
	// Bob has his own budget; one worker, one waiting place: of three
	// slow executions at once, one is refused.
	ts.srv.auth = newAuthenticator(twoKeys, 100, 100)
	var wg sync.WaitGroup
	var mu sync.Mutex
	got := map[int]int{}
	for i := 0; i < 3; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, _ := ts.do(t, "POST", "/v1/exec", bobToken, strings.NewReader(`{"language":"bash","code":"sleep 0.7"}`), "Content-Type", "application/json")
			mu.Lock()
			got[resp.StatusCode]++
			mu.Unlock()
			if resp.StatusCode == 429 && resp.Header.Get("Retry-After") == "" {
				t.Error("queue full without Retry-After")
			}
		}()
	}
	wg.Wait()
	if got[200] != 2 || got[429] != 1 {
		t.Errorf("queue: %v", got)
	}
	_, b := ts.do(t, "GET", "/metrics", bobToken, nil)
	if !strings.Contains(string(b), "codeagent_executions_rejected_total 1") {
		t.Errorf("metrics: %s", b)
	}
}
