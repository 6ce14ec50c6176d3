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
	nw, err := app.Network(app.NetworkRequest{Allow: allow}, s.networkBounds())
	if err != nil {
		return nil, argError("allow_hosts: %v", err)
	}
	return nw, nil
}

// networkBounds are what a call's network may reach: the server's egress
// ceiling and byte maximum, and the manifest's list.
func (s *Server) networkBounds() app.NetworkBounds {
	return app.NetworkBounds{Bounded: true,
		Ceiling: s.cfg.EgressCeiling, CeilingName: "this server's egress ceiling (--egress-ceiling)",
		MaxBytes: s.cfg.EgressMaxBytes, Manifest: s.deps.Manifest, Resolve: s.cfg.EgressResolve, CACerts: s.cfg.EgressCACerts}
}

// dependencies checks a call's dependencies (none: an empty request).
func (s *Server) dependencies(in ExecuteInput, language string) (app.EnvRequest, error) {
	if in.Dependencies == nil {
		return app.EnvRequest{}, nil
	}
	if s.deps.Envs == nil {
		return app.EnvRequest{}, argError("dependencies: this server installs none (it has no data directory)")
	}
	r, err := app.ClientDependencies(in.Dependencies, language, s.networkBounds())
	if err != nil {
		return r, argError("%v", err)
	}
	return r, nil
}
