package mcpserver

import (
	"github.com/codeagent/codeagent/egress"
	"github.com/codeagent/codeagent/safety"
	"github.com/codeagent/codeagent/sandbox"
)

// network is the network of a call's allow_hosts: within the server's
// ceiling (Config.EgressCeiling, empty by default: no network) and, with a
// manifest, within its permissions.network. nil for none.
func (s *Server) network(allow []string) (*sandbox.Network, error) {
	if len(allow) == 0 {
		return nil, nil
	}
	if len(allow) > 100 {
		return nil, argError("allow_hosts has %d entries: at most 100", len(allow))
	}
	if err := egress.Within(allow, s.cfg.EgressCeiling, "this server's egress ceiling (--egress-ceiling)"); err != nil {
		return nil, argError("allow_hosts: %v", err)
	}
	nw := &sandbox.Network{Allow: append([]string(nil), allow...), MaxBytes: s.cfg.EgressMaxBytes, Resolve: s.cfg.EgressResolve}
	if m := s.deps.Manifest; m != nil {
		var lim []string
		if mn := m.Network(); mn != nil {
			lim = mn.Allow
			if mn.MaxBytes > 0 && (nw.MaxBytes == 0 || mn.MaxBytes < nw.MaxBytes) {
				nw.MaxBytes = mn.MaxBytes
			}
		}
		if err := egress.Within(allow, lim, "the manifest "+m.File()); err != nil {
			return nil, argError("allow_hosts: %v", err)
		}
	}
	return nw, nil
}

// checkerFor is the checker of run_task's programs: with a network, the
// server's policy with HTTP clients allowed, built when first needed.
func (s *Server) checkerFor(nw *sandbox.Network) (*safety.Checker, error) {
	if nw == nil {
		return s.checker, nil
	}
	return s.netChk.Get(func() (*safety.Policy, error) {
		p, err := manifestPolicy(s.deps.Manifest)
		if err != nil {
			return nil, err
		}
		return p.WithNetwork(), nil
	})
}
