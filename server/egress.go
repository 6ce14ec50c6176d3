package server

import (
	"encoding/json"
	"math"

	"github.com/codeagent/codeagent/app"
	"github.com/codeagent/codeagent/sandbox"
)

// networkRequest is the network a /v1/exec request or a run asks for:
// hosts within the server's ceiling (Config.EgressCeiling).
type networkRequest struct {
	Allow    []string        `json:"allow"`
	MaxBytes json.RawMessage `json:"max_bytes"` // "10MiB", or bytes
}

// network checks what a request asks against the server's ceiling
// (app.Network) and returns the Spec's network, nil for none. A host
// beyond the ceiling is a *egress.CeilingError (403), a malformed one a
// *egress.RuleError (400), the rest app.ErrInvalid (400).
func (s *Server) network(n *networkRequest) (*sandbox.Network, error) {
	if n == nil {
		return nil, nil
	}
	var maxBytes int64
	if len(n.MaxBytes) > 0 && string(n.MaxBytes) != "null" {
		v, err := parseLimit(kindSize, n.MaxBytes)
		if err != nil {
			return nil, badRequest("network.max_bytes: %v", err)
		}
		maxBytes = int64(min(v, math.MaxInt64/2))
	}
	return app.Network(app.NetworkRequest{Allow: n.Allow, MaxBytes: maxBytes}, s.networkBounds())
}

// networkBounds are what a request's network may reach: the server's
// egress ceiling and byte maximum.
func (s *Server) networkBounds() app.NetworkBounds {
	return app.NetworkBounds{Bounded: true,
		Ceiling: s.cfg.EgressCeiling, CeilingName: "this server's egress ceiling (serve --egress-ceiling)",
		MaxBytes: s.cfg.EgressMaxBytes, Resolve: s.cfg.EgressResolve, CACerts: s.cfg.EgressCACerts}
}
