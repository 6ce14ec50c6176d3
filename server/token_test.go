package server

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

const testLocalToken = "local-token-0123456789abcdef0123456789abcdef"

const mcpInitialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`

// login opens TokenURL without following the redirect and returns the
// answer's status, its Location and the cookie it sets.
func (ts *testServer) login(t *testing.T, token string) (int, string, *http.Cookie) {
	t.Helper()
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Get(TokenURL(ts.URL, token))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var c *http.Cookie
	if cs := resp.Cookies(); len(cs) > 0 {
		c = cs[0]
	}
	return resp.StatusCode, resp.Header.Get("Location"), c
}

// TestLocalTokenRefusesOtherPrograms is a local attacker's side of a server
// with a local token: without it, or with a wrong one in the header, the
// cookie or the address, /v1/exec, /v1/sessions and /mcp answer 401; the
// token as a bearer token or as the page's cookie works; the cookie from
// another origin is refused.
func TestLocalTokenRefusesOtherPrograms(t *testing.T) {
	ts := newTestServer(t, testOptions{cfg: Config{LocalToken: testLocalToken}, noModel: true, mcp: true})
	if code, _, c := ts.login(t, strings.Repeat("x", len(testLocalToken))); code != http.StatusUnauthorized || c != nil {
		t.Errorf("a wrong token in the address: %d, cookie %v", code, c)
	}
	code, loc, cookie := ts.login(t, testLocalToken)
	if code != http.StatusSeeOther || loc != "/" || cookie == nil || !cookie.HttpOnly ||
		cookie.SameSite != http.SameSiteStrictMode || cookie.Path != "/" || cookie.Domain != "" {
		t.Errorf("login: %d, Location %q, cookie %+v", code, loc, cookie)
	}
	u, _ := url.Parse(ts.URL)
	if cookie == nil {
		cookie = &http.Cookie{}
	}
	if want := "codeagent-token-" + u.Port(); cookie.Name != want {
		t.Errorf("cookie %q, want %q (one per server port)", cookie.Name, want)
	}
	wrong := strings.Repeat("0", len(testLocalToken))
	exec := `{"language":"bash","code":"echo ran"}`
	for _, rt := range []struct{ method, path, body string }{
		{"POST", "/v1/exec", exec}, {"GET", "/v1/sessions", ""}, {"POST", "/mcp", mcpInitialize}} {
		send := func(header ...string) (*http.Response, []byte) {
			header = append(header, "Accept", "application/json, text/event-stream")
			if rt.body != "" {
				header = append(header, "Content-Type", "application/json")
			}
			return ts.do(t, rt.method, rt.path, "", strings.NewReader(rt.body), header...)
		}
		for _, h := range [][]string{{}, {"Authorization", "Bearer " + wrong}, {"Authorization", "Basic " + testLocalToken},
			{"Cookie", cookie.Name + "=" + wrong}, {"Cookie", "codeagent-token-1=" + testLocalToken},
			{"Authorization", "Bearer " + wrong, "Cookie", cookie.Name + "=" + testLocalToken}} {
			if resp, b := send(h...); resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") == "" {
				t.Errorf("%s %s with %q: %d %s, want 401", rt.method, rt.path, h, resp.StatusCode, b)
			}
		}
		if resp, b := ts.do(t, rt.method, rt.path+"?token="+testLocalToken, "", strings.NewReader(rt.body),
			"Content-Type", "application/json", "Accept", "application/json, text/event-stream"); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s %s?token=: %d %s, want 401 (only the page trades the token)", rt.method, rt.path, resp.StatusCode, b)
		}
		for _, h := range [][]string{{"Authorization", "Bearer " + testLocalToken}, {"Cookie", cookie.Name + "=" + testLocalToken},
			{"Cookie", cookie.Name + "=" + testLocalToken, "Origin", ts.URL, "Sec-Fetch-Site", "same-origin"}} {
			if resp, b := send(h...); resp.StatusCode != http.StatusOK {
				t.Errorf("%s %s with %q: %d %s", rt.method, rt.path, h, resp.StatusCode, b)
			}
		}
		// The cookie goes to every port of the host: a page of another
		// port is same-site, so its requests carry it; the guard refuses them.
		for _, h := range [][]string{{"Origin", "http://127.0.0.1:1"}, {"Sec-Fetch-Site", "same-site"}, {"Origin", "http://evil.example"}} {
			if resp, b := send(append(h, "Cookie", cookie.Name+"="+testLocalToken)...); resp.StatusCode != http.StatusForbidden {
				t.Errorf("%s %s with the cookie and %q: %d %s, want 403", rt.method, rt.path, h, resp.StatusCode, b)
			}
		}
	}
	if resp, _ := ts.do(t, "GET", "/metrics", "", nil); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("metrics without the token: %d", resp.StatusCode)
	}
	var h map[string]any
	ts.json(t, "GET", "/v1/health", "", nil, 200, &h)
	if h["auth"] != true {
		t.Errorf("health %v", h)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := connectMCP(ctx, ts.URL, wrong); err == nil {
		t.Error("an MCP client with a wrong token was admitted")
	}
	sess, err := connectMCP(ctx, ts.URL, testLocalToken)
	if err != nil {
		t.Fatalf("an MCP client with the token: %v", err)
	}
	sess.Close()
	// The token's owner is the anonymous one of a keyless server: its
	// sessions are those of serve --no-token.
	s := ts.createSession(t, testLocalToken, "mine")
	if _, err := ts.st.OwnedSession(context.Background(), Anonymous, s.ID); err != nil {
		t.Errorf("the token's session is not the anonymous owner's: %v", err)
	}
}

func TestLocalTokenConfig(t *testing.T) {
	for _, c := range []Config{{LocalToken: "short"}, {LocalToken: testLocalToken + " x"},
		{LocalToken: testLocalToken, Keys: twoKeys}} {
		if err := c.Validate(); err == nil {
			t.Errorf("%+v: no error", c)
		} else if strings.Contains(err.Error(), testLocalToken) {
			t.Errorf("the error shows the token: %v", err)
		}
	}
	if err := (Config{LocalToken: testLocalToken}).Validate(); err != nil {
		t.Error(err)
	}
}
