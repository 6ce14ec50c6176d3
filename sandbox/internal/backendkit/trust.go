package backendkit

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/codeagent/codeagent/sandbox"
)

// imageBundles are where images keep their bundle (Go's crypto/x509
// reads the same list); the first an image has is its trust store.
var imageBundles = []string{
	"/etc/ssl/certs/ca-certificates.crt",
	"/etc/pki/tls/certs/ca-bundle.crt",
	"/etc/ssl/ca-bundle.pem",
	"/etc/pki/tls/cacert.pem",
	"/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
	"/etc/ssl/cert.pem",
}

// noBundle is the probe's exit status for an image without a bundle.
const noBundle = 3

// ImageTrust is what the sandboxes of an image-based backend trust, learnt
// once by a program that prints the image's bundle, run in one of the
// backend's own sandboxes (an image's files cannot be read otherwise on
// every backend). A failed probe is tried again at the next call.
type ImageTrust struct {
	Image string
	mu    sync.Mutex
	ts    *sandbox.TrustStore
}

// Get returns the image's trust store, running the probe with run when it
// has not succeeded yet.
func (it *ImageTrust) Get(ctx context.Context, run func(context.Context, sandbox.Spec) (sandbox.Result, error)) (sandbox.TrustStore, error) {
	it.mu.Lock()
	defer it.mu.Unlock()
	if it.ts != nil {
		return *it.ts, nil
	}
	ws, err := os.MkdirTemp("", "codeagent-trust-")
	if err != nil {
		return sandbox.TrustStore{}, err
	}
	defer os.RemoveAll(ws)
	script := `for f in "$@"; do if [ -f "$f" ]; then echo "$f"; exec cat "$f"; fi; done; exit ` + fmt.Sprint(noBundle)
	res, err := run(ctx, sandbox.Spec{Command: append([]string{"sh", "-c", script, "sh"}, imageBundles...), Workspace: ws,
		Limits: sandbox.Limits{Output: 8 << 20}})
	if err != nil {
		return sandbox.TrustStore{}, fmt.Errorf("read the image's certificate bundle: %w", err)
	}
	ts := sandbox.TrustStore{Source: "the image " + it.Image + ": no certificate bundle"}
	switch {
	case res.Status == sandbox.StatusOK && !res.StdoutTruncated:
		path, pemData, _ := bytes.Cut(res.Stdout, []byte("\n"))
		ts = sandbox.TrustStore{Source: "the image " + it.Image + ": " + strings.TrimSpace(string(path)),
			PEM: pemData, Authorities: sandbox.CountAuthorities(pemData)}
	case res.Status == sandbox.StatusError && res.ExitCode == noBundle:
	default:
		return sandbox.TrustStore{}, fmt.Errorf("read the image's certificate bundle: %s (exit code %d) %s",
			res.Status, res.ExitCode, strings.TrimSpace(res.Message+" "+string(res.Stderr)))
	}
	it.ts = &ts
	return ts, nil
}
