package sandboxtest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/codeagent/codeagent/internal/testca"
	"github.com/codeagent/codeagent/sandbox"
)

// trustCount is a Python program printing how many authorities its
// default TLS context trusts, as the host's own clients would load them.
const trustCount = "import ssl\nprint(ssl.create_default_context().cert_store_stats()['x509_ca'])\n"

// benignTrustStore checks that a program trusts at least what the backend
// says its sandboxes trust (the host's bundle, the image's), which the
// backend's own tests compare with the host and the image; a sandbox that
// trusts nothing cannot reach any HTTPS host.
func benignTrustStore(t *testing.T, sb sandbox.Sandbox) {
	res := execute(t, sb, program{lang: "python", code: trustCount})
	wantStatus(t, res, sandbox.StatusOK)
	got, err := strconv.Atoi(strings.TrimSpace(string(res.Stdout)))
	if err != nil {
		t.Fatalf("stdout %q, stderr %s", res.Stdout, res.Stderr)
	}
	tr, ok := backendOf(sb).(sandbox.Truster)
	if !ok {
		if got == 0 {
			t.Fatal("a program's TLS context trusts no certificate authority")
		}
		t.Logf("%d authorities (the sandbox says not what it trusts)", got)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ts, err := tr.TrustStore(ctx)
	if err != nil {
		t.Fatalf("TrustStore: %v", err)
	}
	if ts.Authorities == 0 || got < ts.Authorities {
		t.Fatalf("a program trusts %d authorities; the backend's store (%s) has %d", got, ts.Source, ts.Authorities)
	}
	t.Logf("%d authorities; the backend's store: %s, %d", got, ts.Source, ts.Authorities)
}

// privateCAProgram fetches https://private.test/ with the clients people
// use: Python's default context (urllib), requests, node's https through
// a CONNECT tunnel of the proxy and node's fetch, and curl, each where the
// sandbox has it; it prints what each got as JSON.
const privateCAProgram = clientsPrelude + `run("urllib", lambda: urllib.request.urlopen("https://private.test/urllib", timeout=10).read().decode())
def req():
    try:
        import requests
    except ImportError:
        return "missing"
    return requests.get("https://private.test/requests", timeout=10).text
run("requests", req)
if shutil.which("node"):
    p = subprocess.run(["node", "-e", NODE], capture_output=True, text=True, timeout=30)
    try:
        out.update(json.loads(p.stdout))
    except ValueError:
        out["node"] = "error: " + p.stdout + p.stderr
if shutil.which("curl"):
    p = subprocess.run(["curl", "-sS", "--max-time", "10", "https://private.test/curl"], capture_output=True, text=True, timeout=20)
    out["curl"] = p.stdout or "error: " + p.stderr
print(json.dumps(out))
`

// clientsPrelude starts a program that tries several HTTP clients: run
// keeps what each got in out, or its error, for one JSON line at the end.
const clientsPrelude = `import json, shutil, subprocess, urllib.request
out = {}
def run(name, fn):
    try:
        out[name] = fn()
    except Exception as e:
        out[name] = "error: %r" % e
`

// privateCANode is the node part of privateCAProgram.
const privateCANode = `const http = require('http'), https = require('https'), tls = require('tls');
const proxy = new URL(process.env.HTTPS_PROXY);
const tunnel = (path) => new Promise((resolve, reject) => {
  const req = http.request({ host: proxy.hostname, port: proxy.port, method: 'CONNECT', path: 'private.test:443' });
  req.on('connect', (res, socket) => {
    if (res.statusCode !== 200) { socket.destroy(); return reject(new Error('CONNECT ' + res.statusCode)); }
    const agent = new https.Agent();
    agent.createConnection = () => tls.connect({ socket, servername: 'private.test' });
    const done = (f, v) => { socket.destroy(); f(v); };
    https.get({ host: 'private.test', path, agent }, (r) => {
      let b = ''; r.on('data', (d) => { b += d; }); r.on('end', () => done(resolve, b));
    }).on('error', (e) => done(reject, e));
  });
  req.on('error', reject);
  req.end();
});
(async () => {
  const out = {};
  try { out.node_https = await tunnel('/node-https'); } catch (e) { out.node_https = 'error: ' + e.message; }
  try { out.node_fetch = await (await fetch('https://private.test/node-fetch')).text(); } catch (e) { out.node_fetch = 'error: ' + (e.cause ? e.cause.message : e.message); }
  console.log(JSON.stringify(out));
})();
`

// egressPrivateCA checks Network.CACerts: a host whose certificate comes
// from a private authority is reached over TLS by every client when the
// execution names the authority, and by none when the next one does not
// (it counts for that execution only). The proxy only tunnels: it holds no
// key of the authority, so the clients' TLS reached the server itself.
func egressPrivateCA(t *testing.T, sb sandbox.Sandbox) {
	ca := testca.New(t, "codeagent conformance CA")
	srv := ca.Serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "private-ok %s", r.URL.Path)
	}), "private.test")
	code := strings.Replace(privateCAProgram, "NODE", strconv.Quote(privateCANode), 1)
	nw := func(ca []byte) *sandbox.Network {
		return &sandbox.Network{Allow: []string{"private.test:443"},
			Resolve: map[string]string{"private.test": srv.Listener.Addr().String()}, CACerts: ca}
	}
	res := execute(t, sb, program{lang: "python", code: code, net: nw(ca.PEM), limits: sandbox.Limits{WallTime: 60 * time.Second}})
	var out map[string]string
	if err := json.Unmarshal(lastLine(res.Stdout), &out); err != nil {
		t.Fatalf("%v: %s\nstderr: %s", err, res.Stdout, res.Stderr)
	}
	for name, got := range out {
		if got == "missing" {
			continue
		}
		if want := "private-ok /" + strings.ReplaceAll(name, "_", "-"); got != want {
			t.Errorf("%s with the authority: %q, want %q", name, got, want)
		}
	}
	for _, c := range res.Egress.Connections {
		if c.Method != "CONNECT" || c.Host != "private.test" || c.Port != 443 {
			t.Errorf("the proxy saw %s %s:%d, want only CONNECT private.test:443", c.Method, c.Host, c.Port)
		}
	}
	t.Logf("reached with the authority: %v", out)

	res = execute(t, sb, program{lang: "python", code: code, net: nw(nil), limits: sandbox.Limits{WallTime: 60 * time.Second}})
	out = nil
	if err := json.Unmarshal(lastLine(res.Stdout), &out); err != nil {
		t.Fatalf("%v: %s\nstderr: %s", err, res.Stdout, res.Stderr)
	}
	if !strings.Contains(out["urllib"], "CERTIFICATE_VERIFY_FAILED") {
		t.Errorf("urllib without the authority: %q, want a certificate error", out["urllib"])
	}
	for name, got := range out {
		if got != "missing" && !strings.HasPrefix(got, "error") {
			t.Errorf("%s reached the private host without its authority: %q", name, got)
		}
	}
}
