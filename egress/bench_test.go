package egress

import (
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/codeagent/codeagent/sandbox"
)

// The proxy's cost, on the host's loopback (inside a sandbox the client
// reaches the same listener on its own loopback): a 10 MiB download
// direct, through a bare TCP relay (the floor under any proxy: a second
// connection) and through the proxy, plain HTTP and HTTPS over CONNECT,
// and a small request on a new connection each time.
//
//	go test ./egress -run '^$' -bench . -benchtime 2s

const benchSize = 10 << 20

func benchUpstreams(b *testing.B) (plain, secure *httptest.Server) {
	body := make([]byte, benchSize)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/small" {
			_, _ = io.WriteString(w, "ok")
			return
		}
		w.Header().Set("Content-Length", "10485760")
		_, _ = w.Write(body)
	})
	plain, secure = httptest.NewServer(h), httptest.NewTLSServer(h)
	b.Cleanup(plain.Close)
	b.Cleanup(secure.Close)
	return plain, secure
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func benchClient(proxy string, keepAlive bool) *http.Client {
	tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, DisableKeepAlives: !keepAlive,
		DisableCompression: true}
	if proxy != "" {
		pu, _ := url.Parse("http://" + proxy)
		tr.Proxy = http.ProxyURL(pu)
	}
	return &http.Client{Transport: tr}
}

func fetch(b *testing.B, c *http.Client, u string, want int64) {
	resp, err := c.Get(u)
	if err != nil {
		b.Fatal(err)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil || n != want {
		b.Fatalf("%d bytes, %v", n, err)
	}
}

func BenchmarkDownload10MiB(b *testing.B) {
	plain, secure := benchUpstreams(b)
	hp := func(s *httptest.Server) string {
		return strings.TrimPrefix(strings.TrimPrefix(s.URL, "https://"), "http://")
	}
	_, proxy := startProxy(b, Config{Network: sandbox.Network{Allow: []string{"plain.test", "secure.test"}, MaxBytes: 1 << 40,
		Resolve: map[string]string{"plain.test": hp(plain), "secure.test": hp(secure)}}})
	floor := startRelay(b, hp(plain))
	for _, c := range []struct {
		name, proxy, url string
	}{
		{"http/direct", "", plain.URL + "/big"},
		{"http/relay-floor", "", "http://" + floor + "/big"},
		{"http/proxy", proxy, "http://plain.test/big"},
		{"https/direct", "", secure.URL + "/big"},
		{"https/proxy-connect", proxy, "https://secure.test/big"},
	} {
		b.Run(c.name, func(b *testing.B) {
			cl := benchClient(c.proxy, false)
			b.SetBytes(benchSize)
			cpu := cpuTime()
			for b.Loop() {
				fetch(b, cl, c.url, benchSize)
			}
			// CPU time of the whole exchange (client, proxy and server are
			// this process), which a loaded machine's wall time hides.
			b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/1000/float64(b.N), "cpu-ms/op")
		})
	}
}

// startRelay is the floor under any proxy: a TCP relay to upstream with
// nothing else, io.Copy (splice) both ways, no parsing, no policy, no count.
func startRelay(b *testing.B, upstream string) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				up, err := net.Dial("tcp", upstream)
				if err != nil {
					return
				}
				defer up.Close()
				go func() { _, _ = io.Copy(up, c); closeWrite(up) }()
				_, _ = io.Copy(c, up)
			}()
		}
	}()
	return l.Addr().String()
}

func BenchmarkNewConnection(b *testing.B) {
	plain, _ := benchUpstreams(b)
	_, proxy := startProxy(b, Config{Network: sandbox.Network{Allow: []string{"plain.test"}, MaxBytes: 1 << 40,
		Resolve: map[string]string{"plain.test": strings.TrimPrefix(plain.URL, "http://")}}})
	for _, c := range []struct{ name, proxy, url string }{
		{"direct", "", plain.URL + "/small"},
		{"proxy", proxy, "http://plain.test/small"},
	} {
		b.Run(c.name, func(b *testing.B) {
			cl := benchClient(c.proxy, false)
			for b.Loop() {
				fetch(b, cl, c.url, 2)
			}
		})
	}
}
