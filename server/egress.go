package server

import (
	"encoding/json"
	"math"

	"github.com/codeagent/codeagent/egress"
	"github.com/codeagent/codeagent/safety"
	"github.com/codeagent/codeagent/sandbox"
)

// maxAllow bounds the entries of a request's allow list.
const maxAllow = 100

// networkRequest is the network a /v1/exec request or a run asks for:
// hosts within the server's ceiling (Config.EgressCeiling).
type networkRequest struct {
	Allow    []string        `json:"allow"`
	MaxBytes json.RawMessage `json:"max_bytes"` // "10MiB", or bytes
}

// network checks what a request asks against the server's ceiling and
// returns the Spec's network, nil for none. A host beyond the ceiling is a
// *egress.CeilingError (403), a malformed one a *egress.RuleError (400).
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
	switch {
	case len(n.Allow) == 0 && maxBytes == 0:
		return nil, nil
	case len(n.Allow) == 0:
		return nil, badRequest("network.max_bytes without network.allow")
	case len(n.Allow) > maxAllow:
		return nil, badRequest("network.allow has %d entries: at most %d", len(n.Allow), maxAllow)
	}
	if err := egress.Within(n.Allow, s.cfg.EgressCeiling, "this server's egress ceiling (serve --egress-ceiling)"); err != nil {
		return nil, err
	}
	max := s.cfg.EgressMaxBytes
	if maxBytes > max {
		return nil, badRequest("network.max_bytes is over this server's maximum of %s", sandbox.FormatSize(max))
	}
	nw := &sandbox.Network{Allow: append([]string(nil), n.Allow...), MaxBytes: maxBytes, Resolve: s.cfg.EgressResolve}
	if nw.MaxBytes == 0 {
		nw.MaxBytes = max
	}
	return nw, nil
}

// checkerFor is the checker of a run: with a network, the server's policy
// with HTTP clients allowed (safety.Policy.WithNetwork), built when first
// needed.
func (s *Server) checkerFor(nw *sandbox.Network) (*safety.Checker, error) {
	if nw == nil {
		return s.checker, nil
	}
	if s.deps.NetChecker != nil {
		return s.deps.NetChecker, nil
	}
	return s.netChk.Get(func() (*safety.Policy, error) { return s.deps.Policy.WithNetwork(), nil })
}
