package main

import (
	"bytes"
	"context"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer safe for a writer and a reader at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

func TestServeRefusesNonLoopbackWithoutKeys(t *testing.T) {
	t.Setenv(envAPIKeys, "")
	for _, addr := range []string{"0.0.0.0:0", ":0", "192.0.2.1:8080"} {
		code, _, stderr := runCLI(t, "", "serve", "--addr", addr)
		if code != exitUsage || !strings.Contains(stderr, "without API keys") {
			t.Errorf("%s: exit %d, %s", addr, code, stderr)
		}
	}
}

func TestServeRejectsBadAllowedHosts(t *testing.T) {
	t.Setenv(envAPIKeys, "")
	for _, h := range []string{"http://codeagent.example", "*.example", "example.com/x"} {
		code, _, stderr := runCLI(t, "", "serve", "--allowed-hosts", h, "--data-dir", t.TempDir())
		if code != exitUsage || !strings.Contains(stderr, "allowed host") {
			t.Errorf("%s: exit %d, %s", h, code, stderr)
		}
	}
}

func TestServeRejectsBadKeys(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "keys")
	os.WriteFile(bad, []byte("alice:short\n"), 0o600)
	code, _, stderr := runCLI(t, "", "serve", "--keys-file", bad)
	if code != exitUsage || strings.Contains(stderr, "short") {
		t.Errorf("short token: exit %d, %s (the token must not be shown)", code, stderr)
	}
	t.Setenv(envAPIKeys, "no-colon-here")
	if code, _, stderr := runCLI(t, "", "serve"); code != exitUsage {
		t.Errorf("bad env keys: exit %d, %s", code, stderr)
	}
}

func TestServeLoopbackAddresses(t *testing.T) {
	for addr, want := range map[string]bool{"127.0.0.1:8080": true, "[::1]:80": true, "localhost:1": true,
		"0.0.0.0:80": false, ":8080": false, "example.com:80": false, "10.0.0.1:80": false, "garbage": false} {
		if got := isLoopback(addr); got != want {
			t.Errorf("isLoopback(%q) = %v", addr, got)
		}
	}
}

func TestServeStartsAnswersAndStops(t *testing.T) {
	keys := filepath.Join(t.TempDir(), "keys.json")
	os.WriteFile(keys, []byte(`{"ci": "ci-token-0123456789abcdef"}`), 0o600)
	t.Setenv(envAPIKeys, "")
	for _, k := range []string{"CODEAGENT_PROVIDER", "CODEAGENT_MODEL", "OPENAI_BASE_URL", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"} {
		t.Setenv(k, "")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--addr", "0.0.0.0:0", "--keys-file", keys, "--data-dir", t.TempDir(),
			"--allowed-hosts", "codeagent.example, proxy.internal:9000", "--max-upload-files", "2", "--session-max-files", "2"},
			stdio{in: strings.NewReader(""), out: &bytes.Buffer{}, err: &stderr})
	}()
	addrRE := regexp.MustCompile(`listening on http://\S+:(\d+)`)
	var port string
	for deadline := time.Now().Add(20 * time.Second); port == "" && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if m := addrRE.FindStringSubmatch(stderr.String()); m != nil {
			port = m[1]
		}
	}
	if port == "" {
		t.Fatalf("no address in the output: %s", stderr.String())
	}
	base := "http://127.0.0.1:" + port
	resp, err := http.Get(base + "/v1/health")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("health: %v %v", resp, err)
	}
	resp.Body.Close()
	resp, err = http.Get(base + "/v1/sessions")
	if err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("sessions without a key: %v %v", resp, err)
	}
	resp.Body.Close()
	// A DNS-rebinding name, a foreign page, a form body: refused before
	// the key is even looked at; the configured names and curl pass.
	for _, c := range []struct {
		host, origin, ct string
		want             int
	}{
		{"evil.example:" + port, "", "application/json", http.StatusMisdirectedRequest},
		{"proxy.internal:9001", "", "application/json", http.StatusMisdirectedRequest},
		{"", "http://evil.example", "application/json", http.StatusForbidden},
		{"", "", "text/plain", http.StatusUnsupportedMediaType},
		{"codeagent.example", "https://codeagent.example", "application/json", 200},
		{"proxy.internal:9000", "", "application/json", 200},
		{"", "", "application/json", 200},
	} {
		req, _ := http.NewRequest("POST", base+"/v1/exec", strings.NewReader(`{"language":"python","code":"print(6*7)"}`))
		req.Header.Set("Authorization", "Bearer ci-token-0123456789abcdef")
		req.Header.Set("Content-Type", c.ct)
		if c.host != "" {
			req.Host = c.host
		}
		if c.origin != "" {
			req.Header.Set("Origin", c.origin)
		}
		resp, err = http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != c.want {
			t.Fatalf("exec %+v: %v %v", c, resp, err)
		}
		resp.Body.Close()
	}
	// The upload caps of the flags: 2 files per request, 2 per session.
	send := func(method, path, ct string, body io.Reader) (int, string) {
		req, _ := http.NewRequest(method, base+path, body)
		req.Header.Set("Authorization", "Bearer ci-token-0123456789abcdef")
		req.Header.Set("Content-Type", ct)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, b := send("POST", "/v1/sessions", "application/json", strings.NewReader(`{"name": "caps"}`))
	id := regexp.MustCompile(`"id":"([0-9a-f]+)"`).FindStringSubmatch(b)
	if code != 201 || id == nil {
		t.Fatalf("session: %d %s", code, b)
	}
	files := func(names ...string) (io.Reader, string) {
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		for _, n := range names {
			w, _ := mw.CreateFormFile("file", n)
			io.WriteString(w, "x")
		}
		mw.Close()
		return &buf, mw.FormDataContentType()
	}
	fp := "/v1/sessions/" + id[1] + "/files"
	for _, c := range []struct {
		names []string
		want  int
	}{{[]string{"a", "b", "c"}, 413}, {[]string{"a", "b"}, 201}, {[]string{"c"}, 413}} {
		body, ct := files(c.names...)
		if code, b := send("POST", fp, ct, body); code != c.want {
			t.Errorf("upload %v: %d %s, want %d", c.names, code, b, c.want)
		}
	}
	cancel()
	select {
	case code := <-done:
		if code != exitOK {
			t.Errorf("exit %d: %s", code, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop")
	}
	if log := stderr.String(); strings.Contains(log, "ci-token-0123456789abcdef") || !strings.Contains(log, "key=ci") {
		t.Errorf("the log must name the key, never show its token:\n%s", log)
	}
}

// startServe runs `codeagent serve` with args on a free loopback port and
// returns its address, its standard error and a function that stops it
// and returns its exit code.
func startServe(t *testing.T, args ...string) (string, *syncBuffer, func() int) {
	t.Helper()
	t.Setenv(envAPIKeys, "")
	for _, k := range []string{"CODEAGENT_PROVIDER", "CODEAGENT_MODEL", "OPENAI_BASE_URL", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"} {
		t.Setenv(k, "")
	}
	ctx, cancel := context.WithCancel(context.Background())
	var stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, append([]string{"serve", "--addr", "127.0.0.1:0", "--warm", "0"}, args...),
			stdio{in: strings.NewReader(""), out: &bytes.Buffer{}, err: &stderr})
	}()
	var once sync.Once
	code := -1
	stop := func() int {
		once.Do(func() {
			cancel()
			select {
			case code = <-done:
			case <-time.After(30 * time.Second):
				t.Error("serve did not stop")
			}
		})
		return code
	}
	addrRE := regexp.MustCompile(`listening on (http://\S+:\d+)`)
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if m := addrRE.FindStringSubmatch(stderr.String()); m != nil {
			t.Cleanup(func() { stop() })
			return m[1], &stderr, stop
		}
		select {
		case c := <-done:
			cancel()
			t.Fatalf("serve exited with %d: %s", c, stderr.String())
		default:
		}
	}
	stop()
	t.Fatalf("no address in the output: %s", stderr.String())
	return "", nil, nil
}

// call sends a request as a local program would; header holds name, value
// pairs.
func call(t *testing.T, method, url, body string, header ...string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

const mcpInitialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`

// TestServeTokenByDefault is another local user's side of a server started
// without keys: without the token (which it cannot read: 0600) it gets 401
// on the API and /mcp, a wrong token too; the owner's programs send the
// token of the file, the page trades the printed address for a cookie. A
// link planted at the token file's path is replaced, not followed; the
// token changes at each start and its file goes at shutdown.
func TestServeTokenByDefault(t *testing.T) {
	data := t.TempDir()
	if err := os.Chmod(data, 0o700); err != nil { // private, as a data directory must be: the link is what is tried
		t.Fatal(err)
	}
	victim := filepath.Join(t.TempDir(), "victim")
	os.WriteFile(victim, []byte("precious"), 0o644)
	tokenFile := filepath.Join(data, "serve-token")
	if err := os.Symlink(victim, tokenFile); err != nil {
		t.Fatal(err)
	}
	base, stderr, stop := startServe(t, "--data-dir", data)
	m := regexp.MustCompile(`open (http://\S+)/\?token=([0-9a-f]+)\s.*Bearer \$\(cat (\S+)\)`).FindStringSubmatch(stderr.String())
	if m == nil || m[1] != base || len(m[2]) < 64 || m[3] != tokenFile {
		t.Fatalf("no line with the page's address, the token and the curl header: %s", stderr.String())
	}
	token := m[2]
	port := base[strings.LastIndex(base, ":")+1:]
	if b, _ := os.ReadFile(victim); string(b) != "precious" {
		t.Errorf("the token was written through the planted link: the victim file holds %q", b)
	}
	fi, err := os.Lstat(tokenFile)
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file: %v %v, want a regular file of mode 0600", fi, err)
	}
	if b, _ := os.ReadFile(tokenFile); string(b) != token {
		t.Fatalf("token file holds %q, the printed token is %q", b, token)
	}

	exec := `{"language":"python","code":"print(6*7)"}`
	routes := []struct{ method, path, body string }{
		{"POST", "/v1/exec", exec}, {"GET", "/v1/sessions", ""}, {"POST", "/mcp", mcpInitialize}}
	mcpAccept := []string{"Accept", "application/json, text/event-stream"}
	for _, rt := range routes {
		for _, h := range [][]string{nil, {"Authorization", "Bearer " + strings.Repeat("0", 64)},
			{"Authorization", "Bearer " + token[:63]}, {"Cookie", "codeagent-token-" + port + "=" + token[:63]}} {
			if code, b, _ := call(t, rt.method, base+rt.path+"?token="+token[:8], rt.body, append(h, mcpAccept...)...); code != http.StatusUnauthorized {
				t.Errorf("%s %s with %v: %d %s, want 401", rt.method, rt.path, h, code, b)
			}
		}
		if code, b, _ := call(t, rt.method, base+rt.path, rt.body, "Authorization", "Bearer "+token, mcpAccept[0], mcpAccept[1]); code != 200 {
			t.Errorf("%s %s with the token: %d %s", rt.method, rt.path, code, b)
		}
	}
	if code, b, _ := call(t, "POST", base+"/v1/exec", exec, "Authorization", "Bearer "+token); code != 200 || !strings.Contains(b, `"stdout":"42\n"`) {
		t.Errorf("exec with the token: %d %s", code, b)
	}

	// The printed address sets the page's cookie and sends it to /.
	if code, _, h := call(t, "GET", base+"/?token="+strings.Repeat("0", 64), ""); code != 401 || h.Get("Set-Cookie") != "" {
		t.Errorf("a wrong token in the address: %d, cookie %q", code, h.Get("Set-Cookie"))
	}
	code, _, h := call(t, "GET", m[1]+"/?token="+token, "")
	cookie := strings.SplitN(h.Get("Set-Cookie"), ";", 2)[0]
	if code != http.StatusSeeOther || h.Get("Location") != "/" || !strings.Contains(h.Get("Set-Cookie"), "HttpOnly") || !strings.Contains(h.Get("Set-Cookie"), "SameSite=Strict") {
		t.Fatalf("the printed address: %d, Location %q, Set-Cookie %q", code, h.Get("Location"), h.Get("Set-Cookie"))
	}
	if code, b, _ := call(t, "GET", base+"/v1/sessions", "", "Cookie", cookie); code != 200 {
		t.Errorf("sessions with the page's cookie: %d %s", code, b)
	}
	if code, b, _ := call(t, "GET", base+"/v1/sessions", "", "Cookie", cookie, "Origin", "http://127.0.0.1:1"); code != http.StatusForbidden {
		t.Errorf("sessions with the cookie from another origin: %d %s", code, b)
	}

	if code := stop(); code != exitOK {
		t.Errorf("exit %d: %s", code, stderr.String())
	}
	for _, line := range strings.Split(stderr.String(), "\n") {
		if strings.Contains(line, "msg=request") && strings.Contains(line, token) {
			t.Errorf("the request log shows the token: %s", line)
		}
	}
	if _, err := os.Lstat(tokenFile); !os.IsNotExist(err) {
		t.Errorf("the token file outlived the server: %v", err)
	}
	_, stderr, stop = startServe(t, "--data-dir", data)
	if strings.Contains(stderr.String(), token) {
		t.Error("a second start reused the token")
	}
	stop()
}

// TestServeNoToken: --no-token is today's keyless server, which any local
// program may use; with API keys it is refused as meaningless.
func TestServeNoToken(t *testing.T) {
	data := t.TempDir()
	base, stderr, stop := startServe(t, "--data-dir", data, "--no-token")
	if code, b, _ := call(t, "GET", base+"/v1/sessions", ""); code != 200 {
		t.Errorf("sessions without a token: %d %s", code, b)
	}
	if code, b, _ := call(t, "POST", base+"/mcp", mcpInitialize, "Accept", "application/json, text/event-stream"); code != 200 {
		t.Errorf("mcp without a token: %d %s", code, b)
	}
	if _, err := os.Lstat(filepath.Join(data, "serve-token")); !os.IsNotExist(err) {
		t.Errorf("a token file with --no-token: %v", err)
	}
	if out := stderr.String(); strings.Contains(out, "?token=") || !strings.Contains(out, "no token") {
		t.Errorf("banner: %s", out)
	}
	stop()
	t.Setenv(envAPIKeys, "ci:ci-token-0123456789abcdef")
	if code, _, stderr := runCLI(t, "", "serve", "--no-token", "--data-dir", data); code != exitUsage || !strings.Contains(stderr, "--no-token") {
		t.Errorf("--no-token with keys: exit %d, %s", code, stderr)
	}
}
