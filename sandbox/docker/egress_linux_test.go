package docker

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/codeagent/codeagent/egress"
	"github.com/codeagent/codeagent/sandbox"
)

// TestUnprivilegedEgress: a caller that is not root cannot enter the
// container's network namespace, so a helper exec'd in the container opens
// the proxy's listener and passes it back; an allowed name answers, an
// unlisted one is refused, and nothing else reaches the host's server.
// Run as root, the test runs itself again as nobody (see asNobody).
func TestUnprivilegedEgress(t *testing.T) {
	engineOrSkip(t)
	if os.Geteuid() == 0 {
		asNobody(t, "TestUnprivilegedEgress")
		return
	}
	var conns atomic.Int32
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintf(w, "upstream %s %s", r.Host, r.URL.Path) }),
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				conns.Add(1)
			}
		}}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	b := unprivilegedBackend(t)
	defer b.Close()
	sb := egress.Wrap(b)
	code := `import urllib.request
print(urllib.request.urlopen("http://allowed.test/ok", timeout=10).read().decode())
try:
    urllib.request.urlopen("http://other.test/no", timeout=10)
except Exception as e:
    print("refused", e)
`
	res, err := sb.Run(context.Background(), sandbox.Spec{Command: []string{"python3", "-c", code}, Workspace: t.TempDir(),
		Limits: sandbox.Limits{WallTime: 30 * time.Second},
		Network: &sandbox.Network{Allow: []string{"allowed.test"},
			Resolve: map[string]string{"allowed.test": ln.Addr().String(), "other.test": ln.Addr().String()}}})
	if err != nil {
		t.Fatalf("%v\n%s", err, res.Stderr)
	}
	out := string(res.Stdout)
	if !strings.Contains(out, "upstream allowed.test /ok") || !strings.Contains(out, "refused HTTP Error 403") {
		t.Fatalf("stdout %q, stderr %q", out, res.Stderr)
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("the host's server accepted %d connections, want 1", n)
	}
	if res.Egress == nil || len(res.Egress.Connections) != 2 || res.Egress.Connections[1].Allowed {
		t.Errorf("egress record %+v", res.Egress)
	}
}
