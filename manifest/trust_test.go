package manifest

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/codeagent/codeagent/internal/testca"
)

// permissions.network.ca_certs names PEM files relative to the manifest:
// read and checked at load, given to the network and to installs (a
// mapping with no host but authorities is accepted, for installs); a file
// that is not certificates is an error at its place.
func TestNetworkCACerts(t *testing.T) {
	dir := t.TempDir()
	ca := testca.New(t, "codeagent manifest test CA")
	ca.WriteFile(t, dir)
	if err := os.WriteFile(filepath.Join(dir, "key.pem"), []byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	write := func(yaml string) string {
		p := filepath.Join(dir, "codeagent.yaml")
		if err := os.WriteFile(p, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	m, err := Load(write("agent:\n  permissions:\n    network: {allow: [api.example.com], ca_certs: [ca.pem]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if nw := m.Network(); nw == nil || !bytes.Equal(nw.CACerts, m.CACerts()) || !bytes.Equal(bytes.TrimSpace(m.CACerts()), bytes.TrimSpace(ca.PEM)) {
		t.Fatalf("network %+v, authorities %q", nw, m.CACerts())
	}
	m, err = Load(write("agent:\n  permissions:\n    network: {ca_certs: [" + filepath.Join(dir, "ca.pem") + "]}\n"))
	if err != nil || m.Network() != nil || len(m.CACerts()) == 0 {
		t.Fatalf("authorities alone: %v, %+v", err, m)
	}
	for _, c := range []struct{ file, want string }{
		{"key.pem", `agent.permissions.network.ca_certs[0]`},
		{"missing.pem", "no such file"},
	} {
		_, err := Load(write("agent:\n  permissions:\n    network: {allow: [x.test], ca_certs: [" + c.file + "]}\n"))
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.file) {
			t.Errorf("%s: %v", c.file, err)
		}
	}
}
