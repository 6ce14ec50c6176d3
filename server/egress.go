package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync"

	"github.com/codeagent/codeagent/agent"
	"github.com/codeagent/codeagent/egress"
	"github.com/codeagent/codeagent/safety"
	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/session"
)

// maxAllow bounds the entries of a request's allow list.
const maxAllow = 100

// networkRequest is the network a /v1/exec request or a run asks for:
// hosts within the server's ceiling (Config.EgressCeiling).
type networkRequest struct {
	Allow    []string `json:"allow"`
	MaxBytes size     `json:"max_bytes"`
}

// network checks what a request asks against the server's ceiling and
// returns the Spec's network, nil for none. A host beyond the ceiling is a
// *egress.CeilingError (403), a malformed one a *egress.RuleError (400).
func (s *Server) network(n *networkRequest) (*sandbox.Network, error) {
	if n == nil || (len(n.Allow) == 0 && n.MaxBytes == 0) {
		return nil, nil
	}
	switch {
	case len(n.Allow) == 0:
		return nil, badRequest("network.max_bytes without network.allow")
	case len(n.Allow) > maxAllow:
		return nil, badRequest("network.allow has %d entries: at most %d", len(n.Allow), maxAllow)
	}
	if err := egress.Within(n.Allow, s.cfg.EgressCeiling, "this server's egress ceiling (serve --egress-ceiling)"); err != nil {
		return nil, err
	}
	max := s.cfg.EgressMaxBytes
	if int64(n.MaxBytes) > max {
		return nil, badRequest("network.max_bytes is over this server's maximum of %s", sandbox.FormatSize(max))
	}
	nw := &sandbox.Network{Allow: append([]string(nil), n.Allow...), MaxBytes: int64(n.MaxBytes), Resolve: s.cfg.EgressResolve}
	if nw.MaxBytes == 0 {
		nw.MaxBytes = max
	}
	return nw, nil
}

// netChecker is the checker of runs with a network: the server's policy
// with HTTP clients allowed (safety.Policy.WithNetwork), built when first
// needed.
type netChecker struct {
	once sync.Once
	c    *safety.Checker
	err  error
}

func (s *Server) checkerFor(nw *sandbox.Network) (*safety.Checker, error) {
	if nw == nil {
		return s.checker, nil
	}
	if s.deps.NetChecker != nil {
		return s.deps.NetChecker, nil
	}
	s.netChk.once.Do(func() { s.netChk.c, s.netChk.err = safety.New(s.deps.Policy.WithNetwork()) })
	return s.netChk.c, s.netChk.err
}

// auditExec records a /v1/exec execution that had a network: every
// connection attempt, the allow list and the overrides it ran under.
func (s *Server) auditExec(ctx context.Context, owner string, res sandbox.Result) {
	if res.Egress == nil || s.deps.Store == nil {
		return
	}
	j := res.JSON()
	var id [8]byte
	_, _ = rand.Read(id[:])
	rec := session.NewRecorder(ctx, s.deps.Store, "exec:"+owner, "", hex.EncodeToString(id[:]), s.log)
	rec.Event(agent.Event{Type: agent.EventExecuted, Attempt: 1, MaxAttempts: 1, Phase: "exec", Result: &j,
		DurationMS: res.WallTime.Milliseconds()})
}
