package egress

import (
	"bytes"
	"context"
	"fmt"
	"maps"

	"github.com/codeagent/codeagent/sandbox"
)

// caVariables point the usual clients at the execution's bundle:
// OpenSSL and so Python's ssl and curl (SSL_CERT_FILE, whose directory
// of hashed names stays the sandbox's own), requests, pip and curl by
// their own variables, Go's crypto/x509 (SSL_CERT_FILE). Node adds
// NODE_EXTRA_CA_CERTS to its own store, which npm uses too.
var caVariables = []string{"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "PIP_CERT", "CURL_CA_BUNDLE"}

// withCACerts returns spec with the trust bundle of its Network's CACerts:
// the sandbox's own authorities (the backend's sandbox.TrustStore) and the
// extra ones at sandbox.CABundlePath, the extra ones alone at
// sandbox.CAExtraPath, and the variables that name them. The authorities
// count for this execution only; nothing of the sandbox's own changes.
func withCACerts(ctx context.Context, backend sandbox.Sandbox, spec sandbox.Spec) (sandbox.Spec, error) {
	extra := spec.Network.CACerts
	if len(extra) == 0 {
		return spec, nil
	}
	if _, err := sandbox.ParseCerts(extra); err != nil {
		return spec, fmt.Errorf("%w: the network's certificate authorities: %v", sandbox.ErrInvalidSpec, err)
	}
	t := sandbox.TrusterOf(backend)
	if t == nil {
		return spec, fmt.Errorf("%w: this backend cannot say which certificate authorities its sandboxes trust, so none can be added", sandbox.ErrInvalidSpec)
	}
	ts, err := t.TrustStore(ctx)
	if err != nil {
		return spec, &sandbox.SetupError{Reason: "learn which certificate authorities the sandbox trusts", Err: err}
	}
	extra = append(bytes.TrimRight(extra, "\n"), '\n')
	bundle := append(append(bytes.TrimRight(bytes.Clone(ts.PEM), "\n"), '\n'), extra...)
	if len(ts.PEM) == 0 {
		bundle = extra
	}
	spec.Files = append(append([]sandbox.File(nil), spec.Files...),
		sandbox.File{Path: sandbox.CABundlePath, Data: bundle}, sandbox.File{Path: sandbox.CAExtraPath, Data: extra})
	spec.Env = maps.Clone(spec.Env)
	if spec.Env == nil {
		spec.Env = map[string]string{}
	}
	for _, k := range caVariables {
		spec.Env[k] = sandbox.CABundlePath
	}
	spec.Env["NODE_EXTRA_CA_CERTS"] = sandbox.CAExtraPath
	return spec, nil
}
