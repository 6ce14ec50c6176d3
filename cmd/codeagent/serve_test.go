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
