//go:build linux && (amd64 || arm64)

package namespace

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/codeagent/codeagent/egress"
	"github.com/codeagent/codeagent/internal/testca"
	"github.com/codeagent/codeagent/sandbox"
)

// The sandbox trusts at least what the host's own Python trusts, and sees
// of /etc/ssl only the certificates and OpenSSL's settings (never the
// host's private keys).
func TestTrustStoreIsTheHosts(t *testing.T) {
	out, err := exec.Command("/usr/bin/python3", "-c", "import ssl; print(ssl.create_default_context().cert_store_stats()['x509_ca'])").Output()
	if err != nil {
		t.Skipf("no host Python to compare with: %v", err)
	}
	host, _ := strconv.Atoi(strings.TrimSpace(string(out)))
	if host == 0 {
		t.Skip("the host trusts no authority (install ca-certificates)")
	}
	b := newTestBackend(t)
	ts, err := b.TrustStore(context.Background())
	if err != nil || ts.Authorities < host {
		t.Fatalf("the backend's store has %d authorities (%s, %v); the host's Python trusts %d", ts.Authorities, ts.Source, err, host)
	}
	res, err := b.Run(context.Background(), sandbox.Spec{Command: []string{"python3", "-c", `import os, ssl
print(ssl.create_default_context().cert_store_stats()['x509_ca'], sorted(os.listdir('/etc/ssl')))`}, Workspace: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprint(ts.Authorities, " ['certs', 'openssl.cnf']")
	if _, err := os.Stat("/etc/ssl/openssl.cnf"); err != nil {
		want = fmt.Sprint(ts.Authorities, " ['certs']")
	}
	if got := strings.TrimSpace(string(res.Stdout)); got != want {
		t.Errorf("in the sandbox: %q, want %q (stderr %s)", got, want, res.Stderr)
	}
	if _, err := os.Lstat(filepath.Join(b.etc, "ssl", "private")); !os.IsNotExist(err) {
		t.Errorf("the prepared /etc has ssl/private: %v", err)
	}
}

// Where SSL_CERT_FILE names a bundle on the host, sandboxes trust that
// bundle: a host that only a private authority vouches for is reached
// without --ca-cert.
func TestTrustStoreFollowsSSLCertFile(t *testing.T) {
	ca := testca.New(t, "codeagent host bundle CA")
	srv := ca.Serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "host-bundle-ok") }), "private.test")
	bundle := ca.WriteFile(t, t.TempDir())
	t.Setenv("SSL_CERT_FILE", bundle)
	t.Setenv("SSL_CERT_DIR", "")
	b := newTestBackend(t)
	ts, err := b.TrustStore(context.Background())
	if err != nil || ts.Authorities != 1 || !strings.Contains(ts.Source, "SSL_CERT_FILE="+bundle) {
		t.Fatalf("store %q with %d authorities, %v", ts.Source, ts.Authorities, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := egress.Wrap(b).Run(ctx, sandbox.Spec{Workspace: t.TempDir(),
		Command: []string{"python3", "-c", `import urllib.request; print(urllib.request.urlopen("https://private.test/", timeout=10).read().decode())`},
		Network: &sandbox.Network{Allow: []string{"private.test"}, Resolve: map[string]string{"private.test": srv.Listener.Addr().String()}}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(string(res.Stdout)) != "host-bundle-ok" {
		t.Errorf("%s: %q %s", res.Status, res.Stdout, res.Stderr)
	}
}
