package app

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/codeagent/codeagent/egress"
	"github.com/codeagent/codeagent/internal/testca"
	"github.com/codeagent/codeagent/manifest"
	"github.com/codeagent/codeagent/sandbox"
)

// TestNetwork is the network of one request through each door's bounds:
// request ∩ manifest ∩ ceiling for the hosts, the smaller maximum for the
// bytes, the manifest's list for a command line that names none.
func TestNetwork(t *testing.T) {
	m, err := manifest.Parse("m.yaml", []byte("agent:\n  permissions:\n    network:\n      allow: [api.example.com, \"*.data.example\"]\n      max_bytes: 5MiB\n"))
	if err != nil {
		t.Fatal(err)
	}
	none, err := manifest.Parse("n.yaml", []byte("agent:\n  permissions:\n    network: false\n"))
	if err != nil {
		t.Fatal(err)
	}
	server := NetworkBounds{Bounded: true, Ceiling: []string{"api.example.com", "*.data.example", "other.example"}, CeilingName: "the ceiling", MaxBytes: 10 << 20}
	withManifest := server
	withManifest.Manifest = m
	cli := NetworkBounds{Manifest: m, ManifestDefault: true}
	for _, c := range []struct {
		name    string
		req     NetworkRequest
		b       NetworkBounds
		allow   int
		bytes   int64
		class   error // nil: allowed
		ceiling bool  // a *egress.CeilingError
	}{
		{name: "no network asked", b: server},
		{name: "within the ceiling, its maximum", req: NetworkRequest{Allow: []string{"other.example"}}, b: server, allow: 1, bytes: 10 << 20},
		{name: "beyond the ceiling", req: NetworkRequest{Allow: []string{"evil.example"}}, b: server, ceiling: true},
		{name: "no ceiling: nothing", req: NetworkRequest{Allow: []string{"api.example.com"}}, b: NetworkBounds{Bounded: true, CeilingName: "none"}, ceiling: true},
		{name: "bytes over the maximum", req: NetworkRequest{Allow: []string{"api.example.com"}, MaxBytes: 11 << 20}, b: server, class: ErrInvalid},
		{name: "bytes without hosts", req: NetworkRequest{MaxBytes: 1}, b: server, class: ErrInvalid},
		{name: "too many hosts", req: NetworkRequest{Allow: make([]string, MaxAllow+1)}, b: server, class: ErrInvalid},
		{name: "in the ceiling, not the manifest", req: NetworkRequest{Allow: []string{"other.example"}}, b: withManifest, ceiling: true},
		{name: "in both: the manifest's smaller maximum", req: NetworkRequest{Allow: []string{"x.data.example"}}, b: withManifest, allow: 1, bytes: 5 << 20},
		{name: "manifest without network", req: NetworkRequest{Allow: []string{"api.example.com"}}, b: NetworkBounds{Manifest: none}, ceiling: true},
		{name: "command line: the manifest's list", b: cli, allow: 2, bytes: 5 << 20},
		{name: "command line: narrowed", req: NetworkRequest{Allow: []string{"api.example.com"}, MaxBytes: 1 << 20}, b: cli, allow: 1, bytes: 1 << 20},
		{name: "command line: beyond the manifest", req: NetworkRequest{Allow: []string{"evil.example"}}, b: cli, ceiling: true},
		{name: "command line, no manifest: as asked", req: NetworkRequest{Allow: []string{"evil.example"}}, allow: 1},
	} {
		nw, err := Network(c.req, c.b)
		var ce *egress.CeilingError
		switch {
		case c.ceiling:
			if !errors.As(err, &ce) {
				t.Errorf("%s: %v %+v, want a CeilingError", c.name, err, nw)
			}
		case c.class != nil:
			if !errors.Is(err, c.class) {
				t.Errorf("%s: %v %+v, want %v", c.name, err, nw, c.class)
			}
		case err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.allow == 0 && nw != nil:
			t.Errorf("%s: %+v, want no network", c.name, nw)
		case c.allow > 0 && (nw == nil || len(nw.Allow) != c.allow || nw.MaxBytes != c.bytes):
			t.Errorf("%s: %+v, want %d hosts and %d bytes", c.name, nw, c.allow, c.bytes)
		}
	}
}

// The operator's authorities and the manifest's reach every network a
// door grants (requested or granted later) and its installs; the client's
// request has no way to add one.
func TestNetworkAuthorities(t *testing.T) {
	dir := t.TempDir()
	mca, op := testca.New(t, "manifest CA"), testca.New(t, "operator CA")
	mca.WriteFile(t, dir)
	path := filepath.Join(dir, "m.yaml")
	if err := os.WriteFile(path, []byte("agent:\n  permissions:\n    network: {allow: [api.example.com], ca_certs: [ca.pem]}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := manifest.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	b := NetworkBounds{Bounded: true, Ceiling: []string{"api.example.com", "pypi.test"}, CeilingName: "c", Manifest: m, CACerts: op.PEM}
	nw, err := Network(NetworkRequest{Allow: []string{"api.example.com"}}, b)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := sandbox.ParseCerts(nw.CACerts); n != 2 || err != nil {
		t.Errorf("a requested network has %d authorities (%v), want the operator's and the manifest's", n, err)
	}
	if n, _ := sandbox.ParseCerts(b.GrantBase().CACerts); n != 2 {
		t.Errorf("a granted network has %d authorities", n)
	}
	r, err := ClientDependencies(&DependenciesRequest{Python: []string{"tern"}, IndexURL: "https://pypi.test/simple/"}, "python",
		NetworkBounds{Bounded: true, Ceiling: []string{"pypi.test"}, CeilingName: "c", CACerts: op.PEM})
	if err != nil || !bytes.Equal(r.CACerts, op.PEM) {
		t.Errorf("an install's authorities: %q, %v", r.CACerts, err)
	}
}
