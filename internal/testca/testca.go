// Package testca is the tests' throw-away certificate authority: made in
// the test, kept in memory, gone with it. It signs server certificates for
// loopback HTTPS servers (an index, a registry, an API) that a sandboxed
// program may trust only when told to (--ca-cert).
package testca

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority of one test.
type CA struct {
	// PEM is the authority's certificate.
	PEM  []byte
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

// New makes an authority named name.
func New(t testing.TB, name string) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(t), Subject: pkix.Name{CommonName: name, Organization: []string{"codeagent tests"}},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &CA{PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), cert: cert, key: key}
}

func serial(t testing.TB) *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Certificate is a server certificate signed by ca for hosts (names and
// IP addresses).
func (ca *CA) Certificate(t testing.TB, hosts ...string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(t), Subject: pkix.Name{CommonName: hosts[0]},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// Serve starts an HTTPS server for h on 127.0.0.1 with a certificate of
// ca for hosts (127.0.0.1 and localhost are always added), closed at the
// test's end.
func (ca *CA) Serve(t testing.TB, h http.Handler, hosts ...string) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	// A client that refuses the certificate is what tests expect: its
	// handshake errors are no news.
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.Certificate(t, append(hosts, "127.0.0.1", "localhost")...)}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// WriteFile writes the authority's certificate into dir as ca.pem and
// returns its path.
func (ca *CA) WriteFile(t testing.TB, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(p, ca.PEM, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
