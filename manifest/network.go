package manifest

import (
	"fmt"

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
	// given says that a mapping was written; isTrue that `true` was, which
	// names no host and is refused.
	given, isTrue bool
}

// UnmarshalYAML accepts a boolean or the mapping.
func (n *Network) UnmarshalYAML(node *yaml.Node) error {
	switch node.Kind {
	case yaml.ScalarNode:
		var b bool
		if err := node.Decode(&b); err != nil {
			return fmt.Errorf("line %d: network is false or a mapping {allow: [hosts], max_bytes: size}", node.Line)
		}
		*n = Network{isTrue: b}
		return nil
	case yaml.MappingNode:
		var v struct {
			Allow    []string `yaml:"allow"`
			MaxBytes Size     `yaml:"max_bytes"`
		}
		for i := 0; i+1 < len(node.Content); i += 2 {
			if k := node.Content[i]; k.Value != "allow" && k.Value != "max_bytes" {
				return fmt.Errorf("line %d: field %s not found in network (allow, max_bytes)", k.Line, k.Value)
			}
		}
		if err := node.Decode(&v); err != nil {
			return err
		}
		*n = Network{Allow: v.Allow, MaxBytes: v.MaxBytes, given: true}
		return nil
	}
	return fmt.Errorf("line %d: network is false or a mapping {allow: [hosts], max_bytes: size}", node.Line)
}

// validateNetwork checks the allow list entry by entry.
func (m *Manifest) validateNetwork() []error {
	n := m.Agent.Permissions.Network
	field := "agent.permissions.network"
	var errs []error
	switch {
	case n.isTrue:
		errs = append(errs, m.errAt(field, "true names no host: give the hosts a program may reach, {allow: [\"api.example.com\", \"*.github.com:443\"]}"))
	case n.given && len(n.Allow) == 0:
		errs = append(errs, m.errAt(field+".allow", "lists no host (write network: false for no network)"))
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

// Network is the manifest's network permission for a Spec, or nil for no
// network.
func (m *Manifest) Network() *sandbox.Network {
	n := m.Agent.Permissions.Network
	if len(n.Allow) == 0 {
		return nil
	}
	return &sandbox.Network{Allow: append([]string(nil), n.Allow...), MaxBytes: int64(n.MaxBytes)}
}
