package server

import (
	"bytes"
	"context"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// attack is one request a web page could make the user's browser send to
// the keyless server on loopback.
type attack struct {
	name                   string
	method, path, host, ct string
	body                   string
	header                 []string // name, value pairs
	want                   int
}

// execBody is what a cross-site text/plain form produces: the name of its
// one field is `{"language":"bash","code":"echo pwned","stdin":"` and the
// browser adds `=` and the value `"}`, which is valid JSON.
const execBody = `{"language":"bash","code":"echo pwned","stdin":"="}`

func (ts *testServer) send(t *testing.T, a attack) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(a.method, ts.URL+a.path, strings.NewReader(a.body))
	if err != nil {
		t.Fatal(err)
	}
	if a.host != "" {
		req.Host = a.host
	}
	if a.ct != "" {
		req.Header.Set("Content-Type", a.ct)
	}
	for i := 0; i+1 < len(a.header); i += 2 {
		req.Header.Set(a.header[i], a.header[i+1])
	}
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatalf("%s: %v", a.name, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// TestServeRefusesDriveByRequests sends, as a web page would through the
// user's browser, cross-site and DNS-rebinding requests to the keyless
// server (API and MCP), and checks that each is refused and that nothing
// ran, was created or was stored; then that curl and the page still work.
func TestServeRefusesDriveByRequests(t *testing.T) {
	ts := newTestServer(t, testOptions{noModel: true, mcp: true})
	u, _ := url.Parse(ts.URL)
	port := u.Port()
	self := "http://" + u.Host
	s := ts.createSession(t, "", "victim") // curl-like: no Origin, the right Host
	if resp, b := ts.upload(t, "", s.ID, map[string]string{"secret.csv": "a,b\n1,2\n"}); resp.StatusCode != 201 {
		t.Fatalf("upload: %d %s", resp.StatusCode, b)
	}
	evil := "evil.example:" + port
	crossSite := []string{"Origin", "http://attacker.example", "Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "navigate"}
	rebound := []string{"Origin", "http://" + evil, "Sec-Fetch-Site", "same-origin", "Sec-Fetch-Mode", "cors"}
	var mp bytes.Buffer
	mw := multipart.NewWriter(&mp)
	fw, _ := mw.CreateFormFile("file", "planted.csv")
	io.WriteString(fw, "x\n")
	mw.Close()
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"evil","version":"1"}}}`
	mcpHeaders := func(h ...string) []string {
		return append([]string{"Accept", "application/json, text/event-stream"}, h...)
	}
	attacks := []attack{
		// A cross-site <form enctype="text/plain" method="post"> as a browser sends it...
		{name: "cross-site text/plain form", method: "POST", path: "/v1/exec", ct: "text/plain", body: execBody, header: crossSite, want: 403},
		// ... and the same body from a browser too old to send Origin and Sec-Fetch-Site.
		{name: "text/plain body without Origin", method: "POST", path: "/v1/exec", ct: "text/plain", body: execBody, want: 415},
		{name: "urlencoded body", method: "POST", path: "/v1/exec", ct: "application/x-www-form-urlencoded", body: execBody, want: 415},
		{name: "JSON without a Content-Type", method: "POST", path: "/v1/exec", body: execBody, want: 415},
		{name: "fetch from a foreign Origin", method: "POST", path: "/v1/exec", ct: "application/json", body: execBody,
			header: []string{"Origin", "http://attacker.example"}, want: 403},
		{name: "fetch from another port of localhost", method: "POST", path: "/v1/exec", ct: "application/json", body: execBody,
			header: []string{"Origin", "http://localhost:1"}, want: 403},
		{name: "fetch from an opaque origin", method: "POST", path: "/v1/exec", ct: "application/json", body: execBody,
			header: []string{"Origin", "null"}, want: 403},
		{name: "Sec-Fetch-Site cross-site", method: "POST", path: "/v1/exec", ct: "application/json", body: execBody,
			header: []string{"Sec-Fetch-Site", "cross-site"}, want: 403},
		{name: "Sec-Fetch-Site same-site", method: "POST", path: "/v1/exec", ct: "application/json", body: execBody,
			header: []string{"Sec-Fetch-Site", "same-site"}, want: 403},
		{name: "cross-site multipart upload", method: "POST", path: "/v1/sessions/" + s.ID + "/files", ct: mw.FormDataContentType(),
			body: mp.String(), header: crossSite, want: 403},
		{name: "cross-site session", method: "POST", path: "/v1/sessions", ct: "text/plain", header: crossSite, want: 403},
		{name: "cross-site cancel", method: "POST", path: "/v1/runs/0123/cancel", ct: "text/plain", header: crossSite, want: 403},
		{name: "cross-site delete", method: "DELETE", path: "/v1/sessions/" + s.ID, header: []string{"Origin", "http://attacker.example"}, want: 403},
		// DNS rebinding: evil.example now resolves to 127.0.0.1, so the page is same-origin with itself.
		{name: "rebinding exec", method: "POST", path: "/v1/exec", host: evil, ct: "application/json", body: execBody, header: rebound, want: 421},
		{name: "rebinding list sessions", method: "GET", path: "/v1/sessions", host: evil, header: rebound, want: 421},
		{name: "rebinding read a file", method: "GET", path: "/v1/sessions/" + s.ID + "/files/secret.csv", host: evil, header: rebound, want: 421},
		{name: "rebinding delete", method: "DELETE", path: "/v1/sessions/" + s.ID, host: evil, header: rebound, want: 421},
		{name: "rebinding metrics", method: "GET", path: "/metrics", host: evil, want: 421},
		{name: "rebinding page", method: "GET", path: "/", host: evil, want: 421},
		{name: "rebinding under a localhost-like name", method: "GET", path: "/v1/sessions", host: "localhost.evil.example:" + port, want: 421},
		{name: "rebinding through a 127.0.0.1 name", method: "GET", path: "/v1/sessions", host: "127.0.0.1.nip.io:" + port, want: 421},
		{name: "rebinding with another port", method: "GET", path: "/v1/sessions", host: "127.0.0.1:1", want: 421},
		// The same through MCP: a foreign Origin, a rebound Host, text/plain, cross-site.
		{name: "MCP from a foreign Origin", method: "POST", path: "/mcp", ct: "application/json", body: initialize,
			header: mcpHeaders("Origin", "http://attacker.example"), want: 403},
		{name: "MCP cross-site", method: "POST", path: "/mcp", ct: "application/json", body: initialize,
			header: mcpHeaders("Sec-Fetch-Site", "cross-site"), want: 403},
		{name: "MCP text/plain", method: "POST", path: "/mcp", ct: "text/plain", body: initialize, header: mcpHeaders(), want: 415},
		{name: "MCP rebinding", method: "POST", path: "/mcp", host: evil, ct: "application/json", body: initialize,
			header: mcpHeaders(rebound...), want: 421},
	}
	for _, a := range attacks {
		resp, b := ts.send(t, a)
		if resp.StatusCode != a.want {
			t.Errorf("%s: %d %s, want %d", a.name, resp.StatusCode, b, a.want)
		} else if !strings.Contains(string(b), `"error"`) {
			t.Errorf("%s: no error body: %s", a.name, b)
		}
		if id := resp.Header.Get("Mcp-Session-Id"); id != "" { // admitted: try to run code through it
			h := append(append([]string{}, a.header...), "Mcp-Session-Id", id, "Mcp-Protocol-Version", "2025-06-18")
			next := attack{method: "POST", path: "/mcp", host: a.host, ct: a.ct, header: h}
			next.body = `{"jsonrpc":"2.0","method":"notifications/initialized"}`
			ts.send(t, next)
			next.body = `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"execute_code","arguments":{"language":"bash","code":"echo pwned"}}}`
			_, b = ts.send(t, next)
		}
		if bytes.Contains(b, []byte("pwned")) || bytes.Contains(b, []byte("a,b")) {
			t.Errorf("%s: leaked %s", a.name, b)
		}
	}
	// Nothing ran, nothing was created, stored or deleted.
	_, m := ts.do(t, "GET", "/metrics", "", nil)
	if strings.Contains(string(m), `codeagent_executions_total{source="exec"`) {
		t.Errorf("an execution ran:\n%s", m)
	}
	if recs, err := ts.st.AuditLog(context.Background(), ""); err != nil || len(recs) != 0 {
		t.Errorf("audit records %v %v", recs, err)
	}
	var list struct{ Sessions []sessionJSON }
	ts.json(t, "GET", "/v1/sessions", "", nil, 200, &list)
	if len(list.Sessions) != 1 {
		t.Errorf("sessions %+v", list.Sessions)
	}
	if entries, _ := os.ReadDir(ts.srv.workspaceDir(Anonymous, s.ID)); len(entries) != 1 {
		t.Errorf("workspace %v", entries)
	}

	// Legitimate requests: curl (no Origin, Host 127.0.0.1 or localhost),
	// the page (same origin), a link to the page from another site.
	for _, a := range []attack{
		{name: "curl", method: "POST", path: "/v1/exec", ct: "application/json", body: execBody, want: 200},
		{name: "curl to localhost", method: "POST", path: "/v1/exec", host: "localhost:" + port, ct: "application/json; charset=utf-8", body: execBody, want: 200},
		{name: "the page's fetch", method: "POST", path: "/v1/exec", ct: "application/json", body: execBody,
			header: []string{"Origin", self, "Sec-Fetch-Site", "same-origin", "Sec-Fetch-Mode", "cors"}, want: 200},
		{name: "a typed URL", method: "GET", path: "/v1/health", header: []string{"Sec-Fetch-Site", "none"}, want: 200},
		{name: "a link to the page", method: "GET", path: "/", header: []string{"Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "navigate"}, want: 200},
		{name: "an empty POST", method: "POST", path: "/v1/sessions", want: 201},
	} {
		if resp, b := ts.send(t, a); resp.StatusCode != a.want {
			t.Errorf("%s: %d %s, want %d", a.name, resp.StatusCode, b, a.want)
		}
	}
	_, m = ts.do(t, "GET", "/metrics", "", nil)
	if !strings.Contains(string(m), `codeagent_executions_total{source="exec",status="ok"} 3`) {
		t.Errorf("the legitimate executions are not counted:\n%s", m)
	}
}

// hostTransport sends every request with Host set to host, as a browser
// or reverse proxy using a public name does.
type hostTransport struct{ host string }

func (h hostTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Host = h.host
	return http.DefaultTransport.RoundTrip(r)
}

// TestServeAllowedHosts reaches the server under configured public names,
// the API and MCP alike, and checks that other names and origins are
// still refused and that malformed names are refused by Validate.
func TestServeAllowedHosts(t *testing.T) {
	ts := newTestServer(t, testOptions{noModel: true, mcp: true,
		cfg: Config{AllowedHosts: []string{"CodeAgent.example", "proxy.internal:9000"}}})
	for _, a := range []attack{
		{name: "public name", method: "GET", path: "/v1/sessions", host: "codeagent.example", want: 200},
		{name: "public name, any port", method: "GET", path: "/v1/sessions", host: "codeagent.example:443", want: 200},
		{name: "the page behind TLS", method: "POST", path: "/v1/sessions", host: "codeagent.example", ct: "application/json", body: `{}`,
			header: []string{"Origin", "https://codeagent.example", "Sec-Fetch-Site", "same-origin"}, want: 201},
		{name: "a proxy forwarding its own Host", method: "POST", path: "/v1/sessions", ct: "application/json", body: `{}`,
			header: []string{"Origin", "https://codeagent.example"}, want: 201},
		{name: "name with its port", method: "GET", path: "/v1/sessions", host: "proxy.internal:9000", want: 200},
		{name: "name with another port", method: "GET", path: "/v1/sessions", host: "proxy.internal:9001", want: 421},
		{name: "a subdomain", method: "GET", path: "/v1/sessions", host: "evil.codeagent.example", want: 421},
		{name: "another origin", method: "POST", path: "/v1/sessions", host: "codeagent.example", ct: "application/json", body: `{}`,
			header: []string{"Origin", "https://evil.example"}, want: 403},
		{name: "a lookalike origin", method: "POST", path: "/v1/sessions", host: "codeagent.example", ct: "application/json", body: `{}`,
			header: []string{"Origin", "https://codeagent.example.evil.example"}, want: 403},
	} {
		if resp, b := ts.send(t, a); resp.StatusCode != a.want {
			t.Errorf("%s: %d %s, want %d", a.name, resp.StatusCode, b, a.want)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil)
	sess, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: ts.URL + "/mcp",
		HTTPClient: &http.Client{Transport: hostTransport{"codeagent.example"}}}, nil)
	if err != nil {
		t.Fatalf("MCP under the public name: %v", err)
	}
	sess.Close()
	for _, bad := range []string{"", "http://codeagent.example", "*.example", "codeagent.example/x", "a b", "host:99999", ".example", "example."} {
		if err := (Config{AllowedHosts: []string{bad}}).Validate(); err == nil {
			t.Errorf("allowed host %q accepted", bad)
		}
	}
}
