package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/codeagent/codeagent/internal/pyindex"
	"github.com/codeagent/codeagent/internal/testca"
)

// Programs that fetch https://api.test/ with the clients of each
// language: Python's default context, node's https through a CONNECT
// tunnel of the proxy, Go's net/http.
const (
	httpsPython = `import urllib.request
print(urllib.request.urlopen("https://api.test/python", timeout=10).read().decode())
`
	httpsNode = `const http = require('http'), https = require('https'), tls = require('tls');
const proxy = new URL(process.env.HTTPS_PROXY);
const req = http.request({ host: proxy.hostname, port: proxy.port, method: 'CONNECT', path: 'api.test:443' });
req.on('connect', (res, socket) => {
  const agent = new https.Agent();
  agent.createConnection = () => tls.connect({ socket, servername: 'api.test' });
  https.get({ host: 'api.test', path: '/node', agent }, (r) => {
    let b = ''; r.on('data', (d) => { b += d; }); r.on('end', () => { console.log(b); socket.destroy(); });
  }).on('error', (e) => { console.error(e.message); socket.destroy(); process.exitCode = 1; });
});
req.end();
`
	httpsGo = `package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
)

func main() {
	r, err := http.Get("https://api.test/go")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	b, _ := io.ReadAll(r.Body)
	fmt.Println(string(b))
}
`
)

// exec --ca-cert: a program reaches a host whose certificate comes from a
// private authority with the clients of Python, node and Go, and without
// the flag it gets a certificate error (the authority is not trusted by
// accident); the proxy saw CONNECT only.
func TestExecCACert(t *testing.T) {
	forBackends(t, func(t *testing.T, backend string) {
		ca := testca.New(t, "codeagent exec test CA")
		srv := ca.Serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "secret-ok %s", r.URL.Path)
		}), "api.test")
		caFile := ca.WriteFile(t, t.TempDir())
		netArgs := []string{"exec", "--backend", backend, "--timeout", "2m", "--allow-host", "api.test",
			"--egress-resolve", "api.test=" + srv.Listener.Addr().String()}
		for _, p := range []struct {
			file, code, want string
			without          bool // also run without --ca-cert (Go's build takes 15 s: once)
		}{
			{"fetch.py", httpsPython, "secret-ok /python", true},
			{"fetch.js", httpsNode, "secret-ok /node", true},
			{"fetch.go", httpsGo, "secret-ok /go", false},
		} {
			prog := writeProgram(t, p.file, p.code)
			code, out, errOut := runCLI(t, "", append(append(netArgs, "--ca-cert", caFile), prog)...)
			if code != 0 || strings.TrimSpace(out) != p.want {
				t.Errorf("%s with --ca-cert: exit %d, %q, %s", p.file, code, out, errOut)
			}
			if !p.without {
				continue
			}
			code, out, errOut = runCLI(t, "", append(netArgs, prog)...)
			if code != 1 || strings.Contains(out, "secret-ok") || !strings.Contains(strings.ToLower(errOut), "certificate") {
				t.Errorf("%s without --ca-cert: exit %d, %q, %s", p.file, code, out, errOut)
			}
		}
	})
}

// --ca-cert takes PEM certificates only: a private key, DER, text and a
// missing file are usage errors that name the file.
func TestCACertRefusesWhatIsNotACertificate(t *testing.T) {
	dir := t.TempDir()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalECPrivateKey(key)
	ca := testca.New(t, "codeagent refusal test CA")
	blk, _ := pem.Decode(ca.PEM)
	files := map[string][]byte{
		"key.pem":     pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}),
		"cert.der":    blk.Bytes,
		"notes.txt":   []byte("trust me\n"),
		"missing.pem": nil,
	}
	prog := writeProgram(t, "p.py", "print(1)\n")
	for name, data := range files {
		p := filepath.Join(dir, name)
		if data != nil {
			if err := os.WriteFile(p, data, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		for _, cmd := range [][]string{{"exec", "--ca-cert", p, prog}, {"serve", "--egress-ceiling", "x.test", "--ca-cert", p}} {
			code, _, errOut := runCLI(t, "", cmd...)
			if code != 2 || !strings.Contains(errOut, p) {
				t.Errorf("%s %s: exit %d, %s", cmd[0], name, code, errOut)
			}
		}
	}
	if code, _, errOut := runCLI(t, "", "serve", "--ca-cert", ca.WriteFile(t, dir)); code != 2 || !strings.Contains(errOut, "--egress-ceiling") {
		t.Errorf("serve --ca-cert without a ceiling: exit %d, %s", code, errOut)
	}
}

// exec --require from an index over HTTPS with a private authority: it
// installs with --ca-cert; without it, and from a port where nothing
// listens, exit status 2 and a line that says the index could not be
// reached and why, within seconds.
func TestExecRequireOverHTTPS(t *testing.T) {
	forBackends(t, func(t *testing.T, backend string) {
		ca := testca.New(t, "codeagent index test CA")
		fn, data, err := pyindex.Wheel("tern", "1.0", map[string]string{"tern/__init__.py": "VALUE = 42\n"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		ix := pyindex.NewTLS(t, ca.Certificate(t, "127.0.0.1"), pyindex.Dist{Project: "tern", Filename: fn, Data: data})
		prog := writeProgram(t, "p.py", "import tern\nprint(tern.VALUE)\n")
		base := []string{"exec", "--backend", backend, "--data-dir", t.TempDir(), "--require", "tern==1.0"}
		code, out, errOut := runCLI(t, "", append(base, "--index-url", ix.URL(), prog)...)
		if code != 2 || !strings.Contains(errOut, "the index "+ix.URL()+" could not be reached: TLS failure: certificate verify failed") {
			t.Errorf("without --ca-cert: exit %d, %q, %s", code, out, errOut)
		}
		code, out, errOut = runCLI(t, "", append(base, "--index-url", ix.URL(), "--ca-cert", ca.WriteFile(t, t.TempDir()), prog)...)
		if code != 0 || strings.TrimSpace(out) != "42" {
			t.Errorf("with --ca-cert: exit %d, %q, %s", code, out, errOut)
		}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		closed := "https://" + l.Addr().String() + "/simple/"
		l.Close()
		start := time.Now()
		code, _, errOut = runCLI(t, "", append(base, "--index-url", closed, prog)...)
		if took := time.Since(start); code != 2 || !strings.Contains(errOut, "codeagent: install dependencies: the index "+closed+" could not be reached: connection refused") || took > 10*time.Second {
			t.Errorf("nothing listening: exit %d after %v, %s", code, took, errOut)
		}
	})
}
