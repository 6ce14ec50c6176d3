package sandboxtest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/codeagent/codeagent/egress"
	"github.com/codeagent/codeagent/sandbox"
)

// RunEgress checks network by allow list (package egress) against a
// backend: what is listed answers, through ordinary clients; everything
// else, attacked for real from inside the sandbox, is refused, and the
// host side shows that nothing arrived.
func RunEgress(t *testing.T, sb sandbox.Sandbox) {
	sb = egress.Wrap(sb)
	t.Run("NoNetworkByDefault", func(t *testing.T) { egressDefault(t, sb) })
	t.Run("Allowed", func(t *testing.T) { egressAllowed(t, sb) })
	t.Run("Attacks", func(t *testing.T) { egressAttacks(t, sb) })
	t.Run("ListedAddressPort", func(t *testing.T) { egressListedAddressPort(t, sb) })
	t.Run("MaxBytes", func(t *testing.T) { egressMaxBytes(t, sb) })
	t.Run("Pip", func(t *testing.T) { egressPip(t, sb) })
	t.Run("PrivateCA", func(t *testing.T) { egressPrivateCA(t, sb) })
}

func egressDefault(t *testing.T, sb sandbox.Sandbox) {
	code := leakCheck(fmt.Sprintf("socket.create_connection(('127.0.0.1', %d), timeout=2)", egress.ProxyPort),
		"[k for k in os.environ if k.lower().endswith('_proxy')][0]")
	res := execute(t, sb, program{lang: "python", code: code})
	wantAllBlocked(t, res, 2)
	if res.Egress != nil {
		t.Fatalf("an execution without a network has an egress record: %+v", res.Egress)
	}
}

func egressAllowed(t *testing.T, sb sandbox.Sandbox) {
	up := newUpstream(t)
	tlsUp := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "egress-tls %s", r.URL.Path)
	}))
	defer tlsUp.Close()
	nw := &sandbox.Network{Allow: []string{"allowed.test", "secure.test"},
		Resolve: map[string]string{"allowed.test": up.addr, "secure.test": strings.TrimPrefix(tlsUp.URL, "https://")}}
	code := clientsPrelude + `run("urllib", lambda: urllib.request.urlopen("http://allowed.test/urllib", timeout=10).read().decode())
def req():
    try:
        import requests
    except ImportError:
        return "missing"
    return requests.get("http://allowed.test/requests", timeout=10).text + " | " + requests.get("https://secure.test/requests", timeout=10, verify=False).text
run("requests", req)
if shutil.which("curl"):
    curl = lambda url: subprocess.run(["curl", "-sSk", "--max-time", "10", url], capture_output=True, text=True, timeout=20)
    run("curl", lambda: curl("http://allowed.test/curl").stdout + " | " + curl("https://secure.test/curl").stdout)
print(json.dumps(out))
`
	res := execute(t, sb, program{lang: "python", code: code, net: nw})
	var out map[string]string
	if err := json.Unmarshal(lastLine(res.Stdout), &out); err != nil {
		t.Fatalf("%v: %s\nstderr: %s", err, res.Stdout, res.Stderr)
	}
	want := map[string]string{"urllib": "egress-ok allowed.test /urllib",
		"requests": "egress-ok allowed.test /requests | egress-tls /requests", "curl": "egress-ok allowed.test /curl | egress-tls /curl"}
	clients := 1 // each answers once from allowed.test: node's fetch (below) and those here
	for k, w := range want {
		got, ok := out[k]
		switch {
		case !ok && k == "curl", got == "missing":
			t.Logf("%s is not installed in the sandbox (Debian's python3-requests and curl; for Docker rebuild the image with images/build-offline.sh)", k)
			continue
		case got != w:
			t.Errorf("%s: %q, want %q", k, got, w)
		}
		clients++
	}
	js := `fetch("http://allowed.test/node").then(r => r.text()).then(t => console.log("NODE " + t))
  .then(() => fetch("https://other.test/x")).then(() => console.log("LEAK"), e => console.log("REFUSED " + (e.cause ? e.cause.message : e.message)))`
	res = execute(t, sb, program{lang: "javascript", code: js, net: nw})
	if !bytes.Contains(res.Stdout, []byte("NODE egress-ok allowed.test /node")) ||
		!bytes.Contains(res.Stdout, []byte("REFUSED proxy refused other.test:443: 403 Forbidden (codeagent egress: other.test:443 not in the allow list)")) {
		t.Errorf("node's fetch: %s\nstderr: %s", res.Stdout, res.Stderr)
	}
	if n := len(up.requests("allowed.test /")); n < clients {
		t.Errorf("the upstream saw %d requests: %v", n, up.requests(""))
	}
	if len(up.requests("other.test")) != 0 {
		t.Errorf("a refused name reached the upstream: %v", up.requests(""))
	}
}

func egressAttacks(t *testing.T, sb sandbox.Sandbox) {
	up := newUpstream(t)
	sinkPort, sunk := udpSink(t, "0.0.0.0:0")
	var hostAddrs []string
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if ip, ok := a.(*net.IPNet); ok && ip.IP.To4() != nil && !ip.IP.IsLoopback() {
				hostAddrs = append(hostAddrs, ip.IP.String())
			}
		}
	}
	nw := &sandbox.Network{Allow: []string{"allowed.test", fmt.Sprintf("localhost:%d", up.port)},
		Resolve: map[string]string{"allowed.test": up.addr, "other.test": up.addr}}
	asks := map[string]string{
		"unlisted name":         "GET http://other.test/forbidden-name HTTP/1.1\r\nHost: other.test\r\n\r\n",
		"IP literal":            fmt.Sprintf("GET http://127.0.0.1:%d/forbidden-literal HTTP/1.1\r\nHost: 127.0.0.1:%[1]d\r\n\r\n", up.port),
		"IP literal CONNECT":    fmt.Sprintf("CONNECT 127.0.0.1:%d HTTP/1.1\r\n\r\n", up.port),
		"IPv6 loopback":         fmt.Sprintf("CONNECT [::1]:%d HTTP/1.1\r\n\r\n", up.port),
		"decimal address":       fmt.Sprintf("CONNECT 2130706433:%d HTTP/1.1\r\n\r\n", up.port),
		"unlisted port":         "CONNECT allowed.test:22 HTTP/1.1\r\n\r\n",
		"rebinding to loopback": fmt.Sprintf("GET http://localhost:%d/forbidden-rebind HTTP/1.1\r\nHost: localhost:%[1]d\r\n\r\n", up.port),
		"Host header":           "GET http://allowed.test/forbidden-host HTTP/1.1\r\nHost: other.test\r\n\r\n",
		"IPv4-mapped IPv6":      fmt.Sprintf("CONNECT [::ffff:127.0.0.1]:%d HTTP/1.1\r\n\r\n", up.port),
		"octal address":         fmt.Sprintf("CONNECT 0177.0.0.1:%d HTTP/1.1\r\n\r\n", up.port),
		"metadata service":      "GET http://169.254.169.254/latest/meta-data/ HTTP/1.1\r\nHost: 169.254.169.254\r\n\r\n",
		"userinfo":              "GET http://allowed.test@other.test/forbidden-userinfo HTTP/1.1\r\nHost: other.test\r\n\r\n",
		"the proxy itself":      fmt.Sprintf("CONNECT 127.0.0.1:%d HTTP/1.1\r\n\r\n", egress.ProxyPort),
	}
	var b strings.Builder
	fmt.Fprintf(&b, "import json, socket, urllib.request\nPORT = %d\nres = {}\n", up.port)
	b.WriteString(`def ask(name, raw):
    try:
        s = socket.create_connection(("127.0.0.1", 3128), timeout=10)
        s.sendall(raw.encode())
        res[name] = s.makefile("rb").readline().decode(errors="replace").strip()
    except Exception as e:
        res[name] = "error: %r" % e
def attempt(name, fn):
    try:
        fn()
        res[name] = "LEAK"
    except Exception as e:
        res[name] = "blocked: %r" % e
def udp(addr, port):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(2)
    s.sendto(b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x07example\x03com\x00\x00\x01\x00\x01", (addr, port))
    s.recv(512)
`)
	for name, raw := range asks {
		fmt.Fprintf(&b, "ask(%q, %q)\n", name, raw)
	}
	b.WriteString(`attempt("urllib unlisted", lambda: urllib.request.urlopen("http://other.test/forbidden-urllib", timeout=10))
attempt("direct 127.0.0.1", lambda: socket.create_connection(("127.0.0.1", PORT), timeout=3))
attempt("direct ::1", lambda: socket.create_connection(("::1", PORT), timeout=3))
attempt("resolve in the sandbox", lambda: socket.getaddrinfo("allowed.test", 80))
`)
	for _, a := range hostAddrs {
		fmt.Fprintf(&b, "attempt(%q, lambda: socket.create_connection((%q, PORT), timeout=3))\n", "direct "+a, a)
		fmt.Fprintf(&b, "attempt(%q, lambda: udp(%q, %d))\n", "udp "+a, a, sinkPort)
	}
	for _, ns := range hostResolvers() {
		fmt.Fprintf(&b, "attempt(%q, lambda: udp(%q, 53))\n", "DNS to the host's resolver "+ns, ns)
	}
	fmt.Fprintf(&b, "attempt(\"udp 127.0.0.1\", lambda: udp(\"127.0.0.1\", %d))\nprint(json.dumps(res))\n", sinkPort)
	res := execute(t, sb, program{lang: "python", code: b.String(), net: nw, limits: sandbox.Limits{WallTime: 60e9}})
	var out map[string]string
	if err := json.Unmarshal(lastLine(res.Stdout), &out); err != nil {
		t.Fatalf("%v: %s\nstderr: %s", err, res.Stdout, res.Stderr)
	}
	for name, got := range out {
		_, isAsk := asks[name]
		switch {
		case isAsk && !strings.HasPrefix(got, "HTTP/1.1 403 Forbidden (codeagent egress: "):
			t.Errorf("%s: %q, want a 403 from the proxy naming the host and the rule", name, got)
		case !isAsk && !strings.HasPrefix(got, "blocked"):
			t.Errorf("%s: %q", name, got)
		}
		t.Logf("%s: %s", name, got)
	}
	if len(out) != len(asks)+4+2*len(hostAddrs)+len(hostResolvers())+1 {
		t.Errorf("%d outcomes: %v", len(out), out)
	}
	// The host side: nothing reached the upstream or the UDP socket, and
	// the result records every attempt as refused.
	if n := up.conns.Load(); n != 0 {
		t.Errorf("the upstream accepted %d connections: %v", n, up.requests(""))
	}
	if n := sunk.Load(); n != 0 {
		t.Errorf("%d datagrams from the sandbox reached the host", n)
	}
	if res.Egress == nil {
		t.Fatal("no egress record")
	}
	for _, c := range res.Egress.Connections {
		if c.Allowed {
			t.Errorf("allowed outside the allow list: %+v", c)
		}
	}
	if n := len(res.Egress.Refused()); n < len(asks)+1 {
		t.Errorf("%d refusals recorded, want %d: %+v", n, len(asks)+1, res.Egress.Connections)
	}
}

// egressListedAddressPort attacks a listed address's other ports: with
// 127.0.0.1:U listed, a listed name that resolves to 127.0.0.1 on port S
// must not reach S (a local service the user did not list), by the name
// or by the address; U still answers, by the address and by a name listed
// with U.
func egressListedAddressPort(t *testing.T, sb sandbox.Sandbox) {
	open, shut := newUpstream(t), newUpstream(t)
	es, ok := sb.(*egress.Sandbox)
	if !ok {
		t.Fatalf("%T is not the egress layer", sb)
	}
	rebind := *es // a DNS server that answers loopback for the test's names
	rebind.Lookup = func(_ context.Context, host string) ([]netip.Addr, error) {
		if host == "rebind.test" || host == "good.test" {
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		}
		return nil, fmt.Errorf("%s: no such host (the test's resolver)", host)
	}
	nw := &sandbox.Network{Allow: []string{fmt.Sprintf("127.0.0.1:%d", open.port),
		fmt.Sprintf("rebind.test:%d", shut.port), fmt.Sprintf("good.test:%d", open.port)}}
	attacks := map[string]string{
		"name CONNECT":      fmt.Sprintf("CONNECT rebind.test:%d HTTP/1.1\r\n\r\n", shut.port),
		"name GET":          fmt.Sprintf("GET http://rebind.test:%d/forbidden-name HTTP/1.1\r\nHost: rebind.test:%[1]d\r\n\r\n", shut.port),
		"address CONNECT":   fmt.Sprintf("CONNECT 127.0.0.1:%d HTTP/1.1\r\n\r\n", shut.port),
		"address GET":       fmt.Sprintf("GET http://127.0.0.1:%d/forbidden-address HTTP/1.1\r\nHost: 127.0.0.1:%[1]d\r\n\r\n", shut.port),
		"mapped address":    fmt.Sprintf("CONNECT [::ffff:127.0.0.1]:%d HTTP/1.1\r\n\r\n", shut.port),
		"name, port listed": fmt.Sprintf("CONNECT rebind.test:%d HTTP/1.1\r\n\r\n", open.port), // the name is listed with S only
	}
	allowed := map[string]string{
		"address": fmt.Sprintf("GET http://127.0.0.1:%d/by-address HTTP/1.1\r\nHost: 127.0.0.1:%[1]d\r\n\r\n", open.port),
		"name":    fmt.Sprintf("GET http://good.test:%d/by-name HTTP/1.1\r\nHost: good.test:%[1]d\r\n\r\n", open.port),
	}
	var b strings.Builder
	b.WriteString(`import json, socket
res = {}
def ask(name, raw, whole):
    try:
        s = socket.create_connection(("127.0.0.1", 3128), timeout=10)
        s.sendall(raw.encode())
        f = s.makefile("rb")
        res[name] = (f.read() if whole else f.readline()).decode(errors="replace").strip()
    except Exception as e:
        res[name] = "error: %r" % e
`)
	for name, raw := range attacks {
		fmt.Fprintf(&b, "ask(%q, %q, False)\n", name, raw)
	}
	for name, raw := range allowed {
		fmt.Fprintf(&b, "ask(%q, %q, True)\n", name, raw)
	}
	b.WriteString("print(json.dumps(res))\n")
	res := execute(t, &rebind, program{lang: "python", code: b.String(), net: nw, limits: sandbox.Limits{WallTime: 60e9}})
	var out map[string]string
	if err := json.Unmarshal(lastLine(res.Stdout), &out); err != nil {
		t.Fatalf("%v: %s\nstderr: %s", err, res.Stdout, res.Stderr)
	}
	for name := range attacks {
		if got := out[name]; !strings.HasPrefix(got, "HTTP/1.1 403 Forbidden (codeagent egress: ") {
			t.Errorf("%s: %q, want a 403 from the proxy", name, got)
		}
	}
	for name, path := range map[string]string{"address": "127.0.0.1:%d /by-address", "name": "good.test:%d /by-name"} {
		if want := "egress-ok " + fmt.Sprintf(path, open.port); !strings.Contains(out[name], want) {
			t.Errorf("%s on the listed port: %q, want %q", name, out[name], want)
		}
	}
	// The host side: the listener on the unlisted port accepted nothing.
	if n := shut.conns.Load(); n != 0 {
		t.Errorf("the listener on the unlisted port %d accepted %d connections: %v", shut.port, n, shut.requests(""))
	}
	if n := len(open.requests("/by-")); n != len(allowed) {
		t.Errorf("the listener on the listed port saw %v, want %d requests", open.requests(""), len(allowed))
	}
	if res.Egress == nil {
		t.Fatal("no egress record")
	}
	for _, c := range res.Egress.Connections {
		if c.Allowed && c.Port != open.port {
			t.Errorf("allowed on port %d, which is not listed for 127.0.0.1: %+v", c.Port, c)
		}
	}
}

func egressMaxBytes(t *testing.T, sb sandbox.Sandbox) {
	up := newUpstream(t)
	nw := &sandbox.Network{Allow: []string{"allowed.test"}, MaxBytes: 1 << 20, Resolve: map[string]string{"allowed.test": up.addr}}
	code := `import urllib.request
n, err = 0, ""
try:
    r = urllib.request.urlopen("http://allowed.test/big", timeout=10)
    while True:
        b = r.read(65536)
        if not b:
            break
        n += len(b)
except Exception as e:
    err = repr(e)[:200]
print("COMPLETE" if n == int(r.headers["Content-Length"]) else "CUT", n, err)
`
	res := execute(t, sb, program{lang: "python", code: code, net: nw})
	var n int
	if _, err := fmt.Sscanf(string(res.Stdout), "CUT %d", &n); err != nil || n > 1<<20 {
		t.Fatalf("max_bytes 1 MiB did not cut an 8 MiB download: %s %s", res.Stdout, res.Stderr)
	}
	if res.Egress == nil || res.Egress.Bytes > 1<<20 || len(res.Egress.Connections) == 0 ||
		!strings.Contains(res.Egress.Connections[0].Reason, "max_bytes") {
		t.Fatalf("egress record: %+v", res.Egress)
	}
}

func egressPip(t *testing.T, sb sandbox.Sandbox) {
	if res := execute(t, sb, program{lang: "bash", code: "python3 -m pip --version"}); res.ExitCode != 0 {
		t.Skipf("pip is not installed in the sandbox (Debian's python3-pip; for Docker rebuild the image with images/build-offline.sh): %s", res.Stderr)
	}
	up := newUpstream(t)
	install := `python3 -m pip install --no-cache-dir --retries 0 --timeout 10 --target /tmp/pkgs \
  --index-url http://pypi.test/simple/ --trusted-host pypi.test egresstest-pkg 2>&1 | tail -n 5 &&
python3 -c 'import sys; sys.path.insert(0, "/tmp/pkgs"); import egresstest_pkg; print("VALUE", egresstest_pkg.VALUE)'`
	res := execute(t, sb, program{lang: "bash", code: install, limits: sandbox.Limits{WallTime: 90e9},
		net: &sandbox.Network{Allow: []string{"pypi.test"}, Resolve: map[string]string{"pypi.test": up.addr}}})
	if !bytes.Contains(res.Stdout, []byte("VALUE 42")) || len(up.requests("pypi.test /files/"+wheelFile)) != 1 {
		t.Fatalf("pip install from an allowed index: %s\nstderr: %s\nupstream: %v", res.Stdout, res.Stderr, up.requests(""))
	}
	res = execute(t, sb, program{lang: "bash", code: install, limits: sandbox.Limits{WallTime: 90e9},
		net: &sandbox.Network{Allow: []string{"files.example.org"}, Resolve: map[string]string{"pypi.test": up.addr}}})
	refused := res.Egress.Refused()
	// pip shows a refused index only with -v; the result says which host
	// was refused, and front ends and the agent's feedback repeat it.
	if res.ExitCode == 0 || len(refused) == 0 || refused[0].Host != "pypi.test" {
		t.Fatalf("pip install from an index not allowed: exit %d %s\nstderr: %s\negress: %+v", res.ExitCode, res.Stdout, res.Stderr, res.Egress)
	}
	if n := len(up.requests("/simple")); n != 1 {
		t.Fatalf("the refused pip reached the index: %v", up.requests(""))
	}
}

// hostResolvers are the name servers of the host's /etc/resolv.conf.
func hostResolvers() []string {
	f, err := os.Open("/etc/resolv.conf")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fs := strings.Fields(sc.Text()); len(fs) == 2 && fs[0] == "nameserver" && net.ParseIP(fs[1]).To4() != nil {
			out = append(out, fs[1])
		}
	}
	return out
}

// lastLine is the last non-empty line of out.
func lastLine(out []byte) []byte {
	lines := bytes.Split(bytes.TrimSpace(out), []byte("\n"))
	return lines[len(lines)-1]
}
