package sandboxtest

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// upstream is the egress tests' host side: a real HTTP server on the
// host's loopback, which the sandbox may reach only through the proxy and
// a name mapped to it. It logs every request and counts connections, so
// that a test can check what arrived.
type upstream struct {
	addr  string // 127.0.0.1:PORT
	port  int
	conns atomic.Int32
	mu    sync.Mutex
	log   []string // "Host /path"
	wheel []byte
}

// Files of the package the pip test installs: a PEP 503 simple index and
// a wheel made here.
const (
	wheelProject = "egresstest-pkg"
	wheelFile    = "egresstest_pkg-1.0-py3-none-any.whl"
	bigSize      = 8 << 20
)

func newUpstream(t *testing.T) *upstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &upstream{addr: ln.Addr().String(), port: ln.Addr().(*net.TCPAddr).Port, wheel: makeWheel(t)}
	sum := sha256.Sum256(u.wheel)
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.log = append(u.log, r.Host+" "+r.URL.Path)
		u.mu.Unlock()
		switch p := r.URL.Path; {
		case p == "/big":
			w.Header().Set("Content-Length", fmt.Sprint(bigSize))
			chunk := make([]byte, 64<<10)
			for i := 0; i < bigSize/len(chunk); i++ {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		case p == "/simple/":
			fmt.Fprintf(w, "<html><body><a href=\"/simple/%s/\">%s</a></body></html>", wheelProject, wheelProject)
		case p == "/simple/"+wheelProject+"/":
			fmt.Fprintf(w, "<html><body><a href=\"/files/%s#sha256=%s\">%s</a></body></html>", wheelFile, hex.EncodeToString(sum[:]), wheelFile)
		case p == "/files/"+wheelFile:
			w.Header().Set("Content-Type", "application/octet-stream")
			_, _ = w.Write(u.wheel)
		default:
			fmt.Fprintf(w, "egress-ok %s %s", r.Host, p)
		}
	}), ConnState: func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			u.conns.Add(1)
		}
	}}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return u
}

// requests returns the logged requests whose line contains s.
func (u *upstream) requests(s string) []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []string
	for _, l := range u.log {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return out
}

// makeWheel builds a pure-Python wheel: package egresstest_pkg, VALUE 42.
func makeWheel(t *testing.T) []byte {
	files := []struct{ name, data string }{
		{"egresstest_pkg/__init__.py", "VALUE = 42\n"},
		{"egresstest_pkg-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: egresstest-pkg\nVersion: 1.0\n"},
		{"egresstest_pkg-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: codeagent-sandboxtest\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	var record strings.Builder
	for _, f := range files {
		w, err := zw.Create(f.name)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = w.Write([]byte(f.data))
		sum := sha256.Sum256([]byte(f.data))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", f.name, base64.RawURLEncoding.EncodeToString(sum[:]), len(f.data))
	}
	record.WriteString("egresstest_pkg-1.0.dist-info/RECORD,,\n")
	w, err := zw.Create("egresstest_pkg-1.0.dist-info/RECORD")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = w.Write([]byte(record.String()))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// udpSink counts datagrams that reach a host socket.
func udpSink(t *testing.T, addr string) (port int, got *atomic.Int32) {
	t.Helper()
	c, err := net.ListenPacket("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	got = &atomic.Int32{}
	go func() {
		b := make([]byte, 512)
		for {
			if _, _, err := c.ReadFrom(b); err != nil {
				return
			}
			got.Add(1)
		}
	}()
	return c.LocalAddr().(*net.UDPAddr).Port, got
}
