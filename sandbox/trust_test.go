package sandbox_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/codeagent/codeagent/internal/testca"
	"github.com/codeagent/codeagent/sandbox"
)

func TestParseCerts(t *testing.T) {
	a, b := testca.New(t, "a"), testca.New(t, "b")
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, _ := x509.MarshalECPrivateKey(key)
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
	blk, _ := pem.Decode(a.PEM)
	for _, c := range []struct {
		name string
		in   string
		n    int
		err  string
	}{
		{"one", string(a.PEM), 1, ""},
		{"two with comments", "# Issuer: a\n" + string(a.PEM) + "\n# Issuer: b\n" + string(b.PEM) + "\n", 2, ""},
		{"a private key", string(a.PEM) + string(keyPEM), 1, `"EC PRIVATE KEY" block`},
		{"DER", string(blk.Bytes), 0, "no PEM certificate"},
		{"text", "trust me\n", 0, "no PEM certificate"},
		{"empty", "", 0, "no PEM certificate"},
		{"bad certificate", string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("nope")})), 0, "certificate 1"},
		{"too big", strings.Repeat(string(a.PEM), sandbox.MaxCACerts/len(a.PEM)+1), 0, "at most"},
	} {
		n, err := sandbox.ParseCerts([]byte(c.in))
		switch {
		case c.err == "" && (err != nil || n != c.n):
			t.Errorf("%s: %d, %v", c.name, n, err)
		case c.err != "" && (err == nil || !errors.Is(err, sandbox.ErrNotCertificates) || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.err)
		}
	}
	if n := sandbox.CountAuthorities(append(append([]byte(nil), a.PEM...), keyPEM...)); n != 1 {
		t.Errorf("CountAuthorities: %d", n)
	}
}

// A network's authorities must be certificates: Validate refuses others.
func TestValidateRefusesNetworkAuthoritiesThatAreNotCertificates(t *testing.T) {
	spec := sandbox.Spec{Command: []string{"true"}, Workspace: t.TempDir(), Network: &sandbox.Network{Allow: []string{"x.test"}, CACerts: []byte("nope")},
		Gateway: gateway{}}
	if err := spec.Validate(); !errors.Is(err, sandbox.ErrInvalidSpec) || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("Validate: %v", err)
	}
}

type gateway struct{}

func (gateway) Port() int            { return 3128 }
func (gateway) Serve(l net.Listener) { l.Close() }
