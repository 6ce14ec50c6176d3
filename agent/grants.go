package agent

import (
	"slices"
	"strings"

	"github.com/codeagent/codeagent/egress"
	"github.com/codeagent/codeagent/sandbox"
)

// PackageGranter is an Installer whose allow list a person may widen for
// one run, when they approve a program that declares more.
type PackageGranter interface {
	// Outside returns the project names of reqs the allow list lacks.
	Outside(reqs []string) []string
	// Grant lets names be installed for the rest of the run, never beyond.
	Grant(names []string)
}

// maxDeclaredHosts bounds the hosts one program may ask for.
const maxDeclaredHosts = 20

// declaredHosts returns the hosts a program asks to reach in its leading
// comments (after a #! line), one or more lines
//
//	# network: api.example.com, files.example.org:80
//
// (// for JavaScript); nil when it asks for none. Only a person can grant
// them (see gate): the model never widens its own network.
func declaredHosts(code string) []string {
	var out []string
	for i, line := range strings.SplitN(code, "\n", 40) {
		line = strings.TrimSpace(line)
		if i == 0 && strings.HasPrefix(line, "#!") {
			continue
		}
		var rest string
		switch {
		case strings.HasPrefix(line, "#"):
			rest = line[1:]
		case strings.HasPrefix(line, "//"):
			rest = line[2:]
		default:
			return out
		}
		rest = strings.TrimSpace(rest)
		if k, v, ok := strings.Cut(rest, ":"); ok && strings.EqualFold(strings.TrimSpace(k), "network") {
			for _, h := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' }) {
				if len(out) < maxDeclaredHosts && !slices.Contains(out, h) {
					out = append(out, h)
				}
			}
		}
	}
	return out
}

// networkAllow is what programs of the run may reach now: the user's
// hosts and what a person granted in the run.
func (r *run) networkAllow() []string {
	if r.network == nil {
		return nil
	}
	return slices.Clone(r.network.Allow)
}

// hostsAsked returns the hosts of hosts the run's network does not cover,
// or why they cannot be asked for at all (malformed, or beyond the
// door's ceiling, which no approval passes).
func (r *run) hostsAsked(hosts []string) (ask []string, why string) {
	for _, h := range hosts {
		if _, err := egress.ParseRule(h); err != nil {
			return nil, "the program's # network line names " + cutRunes(h, 100) + ", which is not a host: " + err.Error()
		}
		if egress.Within([]string{h}, r.networkAllow(), "the run's network") == nil {
			continue
		}
		if may := r.a.deps.MayGrantHost; may != nil {
			if err := may(h); err != nil {
				return nil, "the program asks to reach " + h + ", which no one can allow here: " + err.Error()
			}
		}
		ask = append(ask, h)
	}
	return ask, ""
}

// packagesAsked returns the projects of reqs the installer's allow list
// lacks, when a person could grant them (an installer that can be
// widened); otherwise the installer refuses them itself.
func (r *run) packagesAsked(reqs []string) []string {
	g, ok := r.a.deps.Installer.(PackageGranter)
	if !ok || len(reqs) == 0 || strings.Join(reqs, ",") == r.installed {
		return nil
	}
	return g.Outside(reqs)
}

// grantHosts adds hosts to the run's network, for this run only.
func (r *run) grantHosts(hosts []string) {
	if len(hosts) == 0 {
		return
	}
	nw := &sandbox.Network{}
	if b := r.a.deps.GrantBase; r.network == nil && b != nil {
		nw.MaxBytes, nw.Resolve, nw.CACerts = b.MaxBytes, b.Resolve, b.CACerts
	}
	if r.network != nil {
		c := *r.network
		nw = &c
	}
	nw.Allow = append(slices.Clone(nw.Allow), hosts...)
	r.network = nw
	r.a.log.Info("a person granted hosts for this run", "hosts", hosts)
}

// grantPackages lets the installer install names for this run.
func (r *run) grantPackages(names []string) {
	if g, ok := r.a.deps.Installer.(PackageGranter); ok && len(names) > 0 {
		g.Grant(names)
	}
}
