package app

import (
	"fmt"

	"github.com/codeagent/codeagent/manifest"
	"github.com/codeagent/codeagent/safety"
)

// ManifestPolicy is the checker's policy m names (agent.policy, inline or
// a file beside it), or nil for the default policy (also when m is nil).
// An error is of class Invalid, naming the manifest.
func ManifestPolicy(m *manifest.Manifest) (*safety.Policy, error) {
	if m == nil {
		return nil, nil
	}
	var p *safety.Policy
	var err error
	switch {
	case m.Agent.Policy.Inline != nil:
		p, err = safety.ParsePolicy(m.Agent.Policy.Inline)
	case m.Agent.Policy.Path != "":
		p, err = safety.LoadPolicy(m.PolicyPath())
	}
	if err != nil {
		return nil, Errorf(Invalid, "%s", fmt.Sprintf("%s: agent.policy: %v", m.File(), err))
	}
	return p, nil
}
