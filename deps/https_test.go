package deps_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/codeagent/codeagent/deps"
	"github.com/codeagent/codeagent/internal/npmreg"
	"github.com/codeagent/codeagent/internal/pyindex"
	"github.com/codeagent/codeagent/internal/testca"
)

// An index over HTTPS whose certificate comes from a private authority:
// the install trusts it only when told (Request.CACerts), and without it
// the error says that the index could not be reached and why, not pip's
// "from versions: none".
func TestInstallFromHTTPSIndex(t *testing.T) {
	ca := testca.New(t, "codeagent deps test CA")
	ix := pyindex.NewTLS(t, ca.Certificate(t, "127.0.0.1"),
		dist(t, "tern", "1.0", map[string]string{"tern/__init__.py": "VALUE = 42\n"}))
	if !strings.HasPrefix(ix.URL(), "https://") {
		t.Fatalf("index URL %s", ix.URL())
	}
	s := newStore(t)
	ctx := context.Background()

	_, err := s.Ensure(ctx, deps.Request{Python: []string{"tern==1.0"}, IndexURL: ix.URL()})
	var ie *deps.InstallError
	if !errors.As(err, &ie) || !ie.Unreachable || !strings.Contains(ie.Message, "could not be reached: TLS failure: certificate verify failed") ||
		!strings.Contains(ie.Message, ix.URL()) || !strings.Contains(ie.Message, "--ca-cert") {
		t.Fatalf("without the authority: %v, want the index named unreachable by a TLS failure", err)
	}

	lease, err := s.Ensure(ctx, deps.Request{Python: []string{"tern==1.0"}, IndexURL: ix.URL(), CACerts: ca.PEM})
	if err != nil {
		t.Fatalf("with the authority: %v", err)
	}
	defer lease.Release()
	if res := run(t, lease, "import tern; print(tern.VALUE)"); strings.TrimSpace(string(res.Stdout)) != "42" {
		t.Fatalf("with the environment: %s %q %q", res.Status, res.Stdout, res.Stderr)
	}
	// The authority is not part of the key: the same request without it
	// is the same environment, found without the index.
	again, err := s.Ensure(ctx, deps.Request{Python: []string{"tern==1.0"}, IndexURL: ix.URL()})
	if err != nil || again.Installed || again.Key != lease.Key {
		t.Fatalf("second use: %v, installed %v", err, again != nil && again.Installed)
	}
	again.Release()
}

// Failures told apart: an index that refuses connections (said within
// seconds, with the reason), a project the index does not have, a
// version it does not have.
func TestInstallFailuresToldApart(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	closed := closedPort(t)
	start := time.Now()
	_, err := s.Ensure(ctx, deps.Request{Python: []string{"tern==1.0"}, IndexURL: "http://" + closed + "/simple/"})
	took := time.Since(start)
	var ie *deps.InstallError
	want := "the index http://" + closed + "/simple/ could not be reached: connection refused"
	if !errors.As(err, &ie) || !ie.Unreachable || ie.Message != want {
		t.Fatalf("refused: %v, want %q", err, want)
	}
	if took > 10*time.Second {
		t.Errorf("an index that refuses took %v to be named", took)
	}

	ix := pyindex.New(t, dist(t, "tern", "1.0", map[string]string{"tern/__init__.py": "VALUE = 42\n"}))
	_, err = s.Ensure(ctx, deps.Request{Python: []string{"petrel==1.0"}, IndexURL: ix.URL()})
	if !errors.As(err, &ie) || ie.Unreachable || !strings.HasPrefix(ie.Message, "no such package on the index") || !strings.Contains(ie.Message, "petrel==1.0") {
		t.Fatalf("no such package: %v", err)
	}
	_, err = s.Ensure(ctx, deps.Request{Python: []string{"tern==2.0"}, IndexURL: ix.URL()})
	if !errors.As(err, &ie) || ie.Unreachable || ie.Message != "no matching version of tern==2.0: the index has 1.0" {
		t.Fatalf("no matching version: %v", err)
	}
}

// npm from a registry over HTTPS with a private authority, and one that
// refuses connections.
func TestNPMFromHTTPSRegistry(t *testing.T) {
	ca := testca.New(t, "codeagent npm test CA")
	// localhost too: npm's proxy agent (https-proxy-agent) drops the host
	// of an address given by number, and node then checks the certificate
	// against "localhost". Registries people use have names.
	reg := npmreg.NewTLS(t, ca.Certificate(t, "127.0.0.1", "localhost"),
		npmreg.Package{Name: "kiwi", Version: "1.1.0", Files: map[string]string{"index.js": "exports.x = 11\n"}})
	s := newStore(t)
	ctx := context.Background()
	_, err := s.Ensure(ctx, deps.Request{JavaScript: []string{"kiwi@1.1.0"}, NPMRegistry: reg.URL()})
	var ie *deps.InstallError
	if !errors.As(err, &ie) || !ie.Unreachable || !strings.Contains(ie.Message, "could not be reached: TLS failure") {
		t.Fatalf("without the authority: %v", err)
	}
	lease, err := s.Ensure(ctx, deps.Request{JavaScript: []string{"kiwi@1.1.0"}, NPMRegistry: reg.URL(), CACerts: ca.PEM})
	if err != nil {
		t.Fatalf("with the authority: %v", err)
	}
	defer lease.Release()
	if res := runNode(t, lease, "console.log(require('kiwi').x)"); strings.TrimSpace(string(res.Stdout)) != "11" {
		t.Fatalf("with the environment: %s %q %q", res.Status, res.Stdout, res.Stderr)
	}
	closed := closedPort(t)
	start := time.Now()
	_, err = s.Ensure(ctx, deps.Request{JavaScript: []string{"kiwi@1.1.0"}, NPMRegistry: "http://" + closed + "/"})
	if !errors.As(err, &ie) || !ie.Unreachable || ie.Message != "the npm registry http://"+closed+"/ could not be reached: connection refused" {
		t.Fatalf("refused: %v", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("a registry that refuses took %v to be named", took)
	}
}

// closedPort is 127.0.0.1:PORT where nothing listens.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}
