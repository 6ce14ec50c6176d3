package mcpserver

import (
	"github.com/codeagent/codeagent/app"
	"github.com/codeagent/codeagent/sandbox"
)

// network is the network of a call's allow_hosts (app.Network): within
// the server's ceiling (Config.EgressCeiling, empty by default: no
// network) and, with a manifest, within its permissions.network. nil for
// none.
func (s *Server) network(allow []string) (*sandbox.Network, error) {
	nw, err := app.Network(app.NetworkRequest{Allow: allow}, app.NetworkBounds{Bounded: true,
		Ceiling: s.cfg.EgressCeiling, CeilingName: "this server's egress ceiling (--egress-ceiling)",
		MaxBytes: s.cfg.EgressMaxBytes, Manifest: s.deps.Manifest, Resolve: s.cfg.EgressResolve})
	if err != nil {
		return nil, argError("allow_hosts: %v", err)
	}
	return nw, nil
}
