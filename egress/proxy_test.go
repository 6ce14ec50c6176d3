package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/codeagent/codeagent/sandbox"
)

// upstream is a real HTTP server on loopback that logs every request.
type upstream struct {
	*httptest.Server
	mu  sync.Mutex
	log []string // "Host path"
}

func newUpstream(t testing.TB, tlsToo bool) *upstream {
	u := &upstream{}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.log = append(u.log, r.Host+" "+r.URL.Path)
		u.mu.Unlock()
		if r.URL.Path == "/big" {
			w.Header().Set("Content-Length", fmt.Sprint(8<<20))
			chunk := make([]byte, 64<<10)
			for i := 0; i < 128; i++ {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
			return
		}
		body, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "hello %s %s %d", r.Host, r.URL.Path, len(body))
	})
	if tlsToo {
		u.Server = httptest.NewTLSServer(h)
	} else {
		u.Server = httptest.NewServer(h)
	}
	t.Cleanup(u.Close)
	return u
}

func (u *upstream) saw(s string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, l := range u.log {
		if strings.Contains(l, s) {
			return true
		}
	}
	return false
}

func (u *upstream) hostPort() string {
	return strings.TrimPrefix(strings.TrimPrefix(u.URL, "http://"), "https://")
}

// startProxy serves p on a loopback listener of the host, as a backend
// would inside the sandbox.
func startProxy(t testing.TB, cfg Config) (*Proxy, string) {
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go p.Serve(ln)
	t.Cleanup(p.Close)
	return p, ln.Addr().String()
}

func client(proxyAddr string) *http.Client {
	pu, _ := url.Parse("http://" + proxyAddr)
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: http.ProxyURL(pu),
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, DisableKeepAlives: true}}
}

func TestProxyDecides(t *testing.T) {
	up := newUpstream(t, false)
	tu := newUpstream(t, true)
	loop := func(ctx context.Context, host string) ([]netip.Addr, error) {
		if host == "mixed.test" { // a public answer with a private one: the dial could pick either
			return []netip.Addr{netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("10.1.2.3")}, nil
		}
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil // a DNS server that rebinds everything to loopback
	}
	p, addr := startProxy(t, Config{Network: sandbox.Network{
		Allow:   []string{"allowed.test", "secure.test", "mixed.test", "rebind.test:" + strings.Split(up.hostPort(), ":")[1]},
		Resolve: map[string]string{"allowed.test": up.hostPort(), "other.test": up.hostPort(), "secure.test": tu.hostPort()},
	}, Lookup: loop})
	c := client(addr)
	get := func(u string) (int, string, error) {
		resp, err := c.Get(u)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Status + "\n" + string(b), nil
	}
	if code, body, err := get("http://allowed.test/ok"); err != nil || code != 200 || !strings.Contains(body, "hello allowed.test /ok") {
		t.Fatalf("allowed: %d %q %v", code, body, err)
	}
	if code, body, err := get("https://secure.test/tls"); err != nil || code != 200 || !strings.Contains(body, "/tls") {
		t.Fatalf("allowed over CONNECT: %d %q %v", code, body, err)
	}
	refused := []struct{ url, want, path string }{
		{"http://other.test/forbidden-name", "other.test:80 not in the allow list", "/forbidden-name"},
		{"http://" + up.hostPort() + "/forbidden-literal", "an IP address", "/forbidden-literal"},
		{"http://rebind.test:" + strings.Split(up.hostPort(), ":")[1] + "/forbidden-rebind", "resolves to 127.0.0.1, a loopback address", "/forbidden-rebind"},
		{"https://other.test/forbidden-tls", "not in the allow list", "/forbidden-tls"},
		{"http://mixed.test/forbidden-mixed", "resolves to 10.1.2.3, a private address", "/forbidden-mixed"},
		{"https://allowed.test:8443/forbidden-port", "port 8443 is not allowed", "/forbidden-port"},
	}
	for _, r := range refused {
		code, body, err := get(r.url)
		if err == nil && (code != 403 || !strings.Contains(body, r.want)) || err != nil && !strings.Contains(err.Error(), r.want) {
			t.Errorf("%s: %d %q %v; want 403 naming %q", r.url, code, body, err, r.want)
		}
		if up.saw(r.path) || tu.saw(r.path) {
			t.Errorf("%s reached the upstream", r.url)
		}
	}
	p.Close()
	rep := p.Report()
	var allowed, denied int
	for _, c := range rep.Connections {
		if c.Allowed {
			allowed++
		} else {
			denied++
		}
	}
	if allowed != 2 || denied != len(refused) || rep.Bytes == 0 || rep.Resolve["other.test"] == "" {
		t.Errorf("report: %d allowed, %d refused, %d bytes: %+v", allowed, denied, rep.Bytes, rep)
	}
}

func TestProxyHostHeaderAndBadRequests(t *testing.T) {
	up := newUpstream(t, false)
	_, addr := startProxy(t, Config{Network: sandbox.Network{Allow: []string{"allowed.test"},
		Resolve: map[string]string{"allowed.test": up.hostPort()}}})
	for req, want := range map[string]string{
		"GET http://allowed.test/smuggle HTTP/1.1\r\nHost: other.test\r\n\r\n": "403",
		"GET /origin-form HTTP/1.1\r\nHost: allowed.test\r\n\r\n":              "400",
		"GET https://allowed.test/abs HTTP/1.1\r\nHost: allowed.test\r\n\r\n":  "400",
		"CONNECT allowed.test HTTP/1.1\r\n\r\n":                                "400",
		"HELLO\r\n\r\n":                                                        "400",
		"GET http://allowed.test/fine HTTP/1.1\r\nHost: allowed.test\r\nConnection: keep-alive, X-Secret\r\nX-Secret: 1\r\n\r\n": "200",
	} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.WriteString(c, req)
		line, _ := bufio.NewReader(c).ReadString('\n')
		c.Close()
		if !strings.Contains(line, " "+want+" ") {
			t.Errorf("%q: %q, want %s", req, line, want)
		}
	}
	for _, p := range []string{"/smuggle", "/origin-form", "/abs"} {
		if up.saw(p) {
			t.Errorf("%s reached the upstream", p)
		}
	}
	if !up.saw("allowed.test /fine") {
		t.Error("the good request did not arrive")
	}
}

func TestProxyMaxBytes(t *testing.T) {
	up := newUpstream(t, false)
	p, addr := startProxy(t, Config{Network: sandbox.Network{Allow: []string{"allowed.test"}, MaxBytes: 1 << 20,
		Resolve: map[string]string{"allowed.test": up.hostPort()}}})
	resp, err := client(addr).Get("http://allowed.test/big")
	var n int64
	if err == nil {
		n, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if err == nil || n > 1<<20 {
		t.Fatalf("downloaded %d bytes of 8 MiB with max_bytes 1 MiB, err %v", n, err)
	}
	// The budget is spent: the next connection is refused.
	resp, err = client(addr).Get("http://allowed.test/after")
	if err != nil || resp.StatusCode != 403 {
		t.Fatalf("after the cap: %v %v", resp, err)
	}
	resp.Body.Close()
	p.Close()
	rep := p.Report()
	if rep.Bytes > 1<<20 || rep.Bytes < 1<<19 || !strings.Contains(rep.Connections[0].Reason, "max_bytes") {
		t.Errorf("report: %d bytes, %+v", rep.Bytes, rep.Connections)
	}
}
