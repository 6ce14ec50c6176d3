package app

import (
	"bytes"

	"github.com/codeagent/codeagent/egress"
	"github.com/codeagent/codeagent/manifest"
	"github.com/codeagent/codeagent/sandbox"
)

// MaxAllow bounds the entries of a request's allow list.
const MaxAllow = 100

// NetworkRequest is the network one request asks for.
type NetworkRequest struct {
	// Allow are egress rules (host, *.domain, host:port, CIDR).
	Allow []string
	// MaxBytes is the request's byte budget; 0 takes the most the bounds
	// allow.
	MaxBytes int64
	// Resolve maps names to addresses instead of DNS, for tests, where the
	// door lets a request say so (the command line's --egress-resolve);
	// NetworkBounds.Resolve otherwise.
	Resolve map[string]string
}

// NetworkBounds are what the requests of one door may be given.
type NetworkBounds struct {
	// Bounded says the door has a ceiling of its own: Ceiling, named by
	// CeilingName in refusals, beyond which no request reaches (a server's
	// --egress-ceiling; empty: no network at all). The command line has
	// none: its user is the operator.
	Bounded     bool
	Ceiling     []string
	CeilingName string
	// MaxBytes is the most bytes a request may be given (0: no bound); a
	// request that names none gets this.
	MaxBytes int64
	// Manifest, when set, bounds the hosts (its permissions.network; none
	// when it has no list) and the bytes too.
	Manifest *manifest.Manifest
	// ManifestDefault gives a request that names no host the manifest's
	// network (the command line: the manifest's list applies unless
	// --allow-host narrows it).
	ManifestDefault bool
	// Resolve maps names to addresses for tests (serve --egress-resolve).
	Resolve map[string]string
	// CACerts are PEM certificates of authorities that every network the
	// door grants, and every install it makes, trusts besides the
	// sandbox's own: the operator's (--ca-cert; see ReadCACerts), never a
	// client's. The manifest's network.ca_certs are added to them.
	CACerts []byte
}

// Trust is the PEM of the authorities b adds: its own, then the
// manifest's.
func (b NetworkBounds) Trust() []byte {
	var m []byte
	if b.Manifest != nil {
		m = b.Manifest.CACerts()
	}
	return JoinPEM(b.CACerts, m)
}

// JoinPEM joins PEM bundles, each ending with a newline; nil when all are
// empty.
func JoinPEM(bundles ...[]byte) []byte {
	var out []byte
	for _, b := range bundles {
		if b = bytes.TrimSpace(b); len(b) > 0 {
			out = append(append(out, b...), '\n')
		}
	}
	return out
}

// ReadCACerts reads the PEM certificate files of an operator's --ca-cert
// into one bundle. A file that cannot be read or is not PEM certificates
// (a private key, DER, text) is an Invalid error naming it.
func ReadCACerts(paths []string) ([]byte, error) {
	var out []byte
	for _, p := range paths {
		b, err := manifest.ReadCACert(p)
		if err != nil {
			return nil, invalidf("%v", err)
		}
		out = JoinPEM(out, b)
	}
	if len(out) > sandbox.MaxCACerts {
		return nil, invalidf("the certificate authorities given come to %s: at most %s", sandbox.FormatSize(int64(len(out))), sandbox.FormatSize(sandbox.MaxCACerts))
	}
	return out, nil
}

// Network is the one place where the network of an execution or a run is
// decided, for every door: the request's hosts within the door's ceiling
// and the manifest's list (request ∩ manifest ∩ ceiling), its byte budget
// within both maxima. It returns nil for no network. A malformed host is a
// *egress.RuleError, one beyond a bound a *egress.CeilingError, anything
// else wrong with the request an error of class ErrInvalid.
func Network(req NetworkRequest, b NetworkBounds) (*sandbox.Network, error) {
	var fromManifest *sandbox.Network
	if b.Manifest != nil {
		fromManifest = b.Manifest.Network()
	}
	allow := req.Allow
	if len(allow) == 0 && b.ManifestDefault && fromManifest != nil {
		allow = fromManifest.Allow
	}
	switch {
	case len(allow) == 0 && req.MaxBytes == 0 && len(req.Resolve) == 0:
		return nil, nil
	case len(allow) == 0:
		return nil, invalidf("a byte budget or name overrides need a network: give hosts to reach (an allow list)")
	case len(allow) > MaxAllow:
		return nil, invalidf("the allow list has %d entries: at most %d", len(allow), MaxAllow)
	case req.MaxBytes < 0:
		return nil, invalidf("the network's byte budget is negative")
	}
	if b.Bounded {
		if err := egress.Within(allow, b.Ceiling, b.CeilingName); err != nil {
			return nil, err
		}
	}
	most, mostBy := b.MaxBytes, "the most allowed here"
	if b.Bounded {
		mostBy = "the maximum of " + b.CeilingName
	}
	if b.Manifest != nil {
		var lim []string
		if fromManifest != nil {
			lim = fromManifest.Allow
			if fromManifest.MaxBytes > 0 && (most == 0 || fromManifest.MaxBytes < most) {
				most, mostBy = fromManifest.MaxBytes, "the manifest's max_bytes"
			}
		}
		if err := egress.Within(allow, lim, "the manifest "+b.Manifest.File()); err != nil {
			return nil, err
		}
	}
	if most > 0 && req.MaxBytes > most {
		return nil, invalidf("a byte budget of %s for the network is more than %s, %s",
			sandbox.FormatSize(req.MaxBytes), mostBy, sandbox.FormatSize(most))
	}
	nw := &sandbox.Network{Allow: append([]string(nil), allow...), MaxBytes: req.MaxBytes, Resolve: b.Resolve, CACerts: b.Trust()}
	if nw.MaxBytes == 0 {
		nw.MaxBytes = most
	}
	if req.Resolve != nil {
		nw.Resolve = req.Resolve
	}
	return nw, nil
}

// CheckCeiling refuses an egress ceiling (a server's --egress-ceiling)
// whose rules egress cannot read.
func CheckCeiling(rules []string) error {
	_, err := egress.NewPolicy(rules)
	return err
}

// GrantBase is RunRequest.GrantBase for a door whose bounds are b: a
// network granted to a run that had none gets b's byte budget and name
// overrides.
func (b NetworkBounds) GrantBase() *sandbox.Network {
	return &sandbox.Network{MaxBytes: b.MaxBytes, Resolve: b.Resolve, CACerts: b.Trust()}
}

// MayGrantHost is RunRequest.MayGrantHost for a door whose bounds are b:
// a host a program asks for may be granted by a person only within the
// door's ceiling, which no approval passes (the command line has none).
func (b NetworkBounds) MayGrantHost(rule string) error {
	if !b.Bounded {
		return nil
	}
	return egress.Within([]string{rule}, b.Ceiling, b.CeilingName)
}
