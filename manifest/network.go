package manifest

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"gopkg.in/yaml.v3"

	"github.com/codeagent/codeagent/egress"
	"github.com/codeagent/codeagent/sandbox"
)

// Network is permissions.network: false (the default, no network at all)
// or a mapping {allow: [HOST[:PORT], ...], max_bytes: SIZE}, the hosts a
// program may reach through codeagent's egress proxy (package egress).
type Network struct {
	Allow    []string
	MaxBytes Size
	// CACerts are PEM files (relative to the manifest) of authorities
	// that programs and installs trust besides the sandbox's own; read
	// and checked by Validate into caPEM.
	CACerts []string
	caPEM   []byte
	// given says that a mapping was written; isTrue that `true` was, which
	// names no host and is refused.
	given, isTrue bool
}

// networkForm is how the network permission is written.
const networkForm = "network is false or a mapping {allow: [hosts], max_bytes: size, ca_certs: [PEM files]}"

// UnmarshalYAML accepts a boolean or the mapping.
func (n *Network) UnmarshalYAML(node *yaml.Node) error {
	switch node.Kind {
	case yaml.ScalarNode:
		var b bool
		if err := node.Decode(&b); err != nil {
			return fmt.Errorf("line %d: %s", node.Line, networkForm)
		}
		*n = Network{isTrue: b}
		return nil
	case yaml.MappingNode:
		var v struct {
			Allow    []string `yaml:"allow"`
			MaxBytes Size     `yaml:"max_bytes"`
			CACerts  []string `yaml:"ca_certs"`
		}
		for i := 0; i+1 < len(node.Content); i += 2 {
			if k := node.Content[i]; k.Value != "allow" && k.Value != "max_bytes" && k.Value != "ca_certs" {
				return fmt.Errorf("line %d: field %s not found in network (allow, max_bytes, ca_certs)", k.Line, k.Value)
			}
		}
		if err := node.Decode(&v); err != nil {
			return err
		}
		*n = Network{Allow: v.Allow, MaxBytes: v.MaxBytes, CACerts: v.CACerts, given: true}
		return nil
	}
	return fmt.Errorf("line %d: %s", node.Line, networkForm)
}

// validateNetwork checks the allow list entry by entry.
func (m *Manifest) validateNetwork() []error {
	n := m.Agent.Permissions.Network
	field := "agent.permissions.network"
	var errs []error
	switch {
	case n.isTrue:
		errs = append(errs, m.errAt(field, "true names no host: give the hosts a program may reach, {allow: [\"api.example.com\", \"*.github.com:443\"]}"))
	case n.given && len(n.Allow) == 0 && len(n.CACerts) == 0:
		errs = append(errs, m.errAt(field+".allow", "lists no host (write network: false for no network)"))
	}
	m.Agent.Permissions.Network.caPEM = nil
	for i, p := range n.CACerts {
		if !filepath.IsAbs(p) {
			p = filepath.Join(filepath.Dir(m.file), p)
		}
		b, err := ReadCACert(p)
		if err != nil {
			errs = append(errs, m.errAt(fmt.Sprintf("%s.ca_certs[%d]", field, i), "%v", err))
			continue
		}
		m.Agent.Permissions.Network.caPEM = append(m.Agent.Permissions.Network.caPEM, b...)
	}
	for i, a := range n.Allow {
		if _, err := egress.ParseRule(a); err != nil {
			errs = append(errs, m.errAt(fmt.Sprintf("%s.allow[%d]", field, i), "%v", err))
		}
	}
	if n.MaxBytes < 0 {
		errs = append(errs, m.errAt(field+".max_bytes", "must not be negative"))
	}
	return errs
}

// CACerts are the authorities of permissions.network.ca_certs, as PEM;
// nil for none.
func (m *Manifest) CACerts() []byte { return m.Agent.Permissions.Network.caPEM }

// ReadCACert reads a file of PEM certificates (--ca-cert,
// network.ca_certs): a regular file of at most sandbox.MaxCACerts bytes
// holding certificates only. Errors name the file.
func ReadCACert(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("certificate file: %w", err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("certificate file %s: not a regular file", path)
	}
	b, err := io.ReadAll(io.LimitReader(f, sandbox.MaxCACerts+1))
	if err != nil {
		return nil, fmt.Errorf("certificate file %s: %w", path, err)
	}
	if _, err := sandbox.ParseCerts(b); err != nil {
		return nil, fmt.Errorf("certificate file %s: %w", path, err)
	}
	return append(bytes.TrimRight(b, "\n"), '\n'), nil
}

// Network is the manifest's network permission for a Spec, or nil for no
// network.
func (m *Manifest) Network() *sandbox.Network {
	n := m.Agent.Permissions.Network
	if len(n.Allow) == 0 {
		return nil
	}
	return &sandbox.Network{Allow: append([]string(nil), n.Allow...), MaxBytes: int64(n.MaxBytes), CACerts: n.caPEM}
}
