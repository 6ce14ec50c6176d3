package sandbox

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
)

// TrustStore is the set of certificate authorities a backend's sandboxes
// trust by default, as one PEM bundle: the host's on the namespace
// backend, the image's on the Docker and Kubernetes backends.
type TrustStore struct {
	// Source says where the bundle comes from, for people ("the host's
	// /etc/ssl/certs/ca-certificates.crt").
	Source string
	// PEM is the bundle; Authorities counts the authorities in it
	// (CountAuthorities).
	PEM         []byte
	Authorities int
}

// Truster is implemented by backends that can say what their sandboxes
// trust. TrustStore may run a program in a sandbox to learn it; it is
// cheap after the first call. An error means it could not be learnt; a
// sandbox whose image has no bundle has an empty TrustStore and no error.
//
// The egress layer needs it to add a Network's CACerts to what a program
// trusts (see Network.CACerts): a backend without it cannot take them.
type Truster interface {
	TrustStore(ctx context.Context) (TrustStore, error)
}

// TrusterOf finds the Truster below sb's wrappers (those with an
// Unwrap() Sandbox method, as the egress layer has), or nil.
func TrusterOf(sb Sandbox) Truster {
	for i := 0; sb != nil && i < 16; i++ {
		if t, ok := sb.(Truster); ok {
			return t
		}
		u, ok := sb.(interface{ Unwrap() Sandbox })
		if !ok {
			return nil
		}
		sb = u.Unwrap()
	}
	return nil
}

// Where the egress layer places a trust bundle for an execution whose
// Network has CACerts (below /code, where every backend places files):
// CABundlePath holds the sandbox's own authorities followed by the extra
// ones, CAExtraPath the extra ones alone (Node adds them to its own).
const (
	CABundlePath = "/code/.codeagent/ca-certificates.crt"
	CAExtraPath  = "/code/.codeagent/ca-extra.crt"
)

// MaxCACerts bounds the extra authorities of one execution, in bytes of
// PEM; a host's whole bundle is about 200 KB.
const MaxCACerts = 1 << 20

// ErrNotCertificates is wrapped by ParseCerts' errors.
var ErrNotCertificates = errors.New("not PEM certificates")

// ParseCerts checks that b holds one or more PEM certificates and no
// other PEM block, and returns how many. Text around the blocks is
// allowed (bundles carry comments); private keys, other block types and
// certificates that X.509 cannot read are refused.
func ParseCerts(b []byte) (int, error) {
	if len(b) > MaxCACerts {
		return 0, fmt.Errorf("%w: %d bytes, at most %d", ErrNotCertificates, len(b), MaxCACerts)
	}
	n := 0
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			return n, fmt.Errorf("%w: a %q block (only CERTIFICATE blocks are taken)", ErrNotCertificates, blk.Type)
		}
		if _, err := x509.ParseCertificate(blk.Bytes); err != nil {
			return n, fmt.Errorf("%w: certificate %d: %v", ErrNotCertificates, n+1, err)
		}
		n++
	}
	if n == 0 {
		return 0, fmt.Errorf("%w: no PEM certificate found", ErrNotCertificates)
	}
	return n, nil
}

// CountAuthorities counts the certificate authorities in a bundle: the
// certificates X.509 reads that may sign others (a CA's basic constraints,
// or an old version 1 root), as OpenSSL counts them; other certificates
// and what cannot be read are skipped (a host's bundle is taken as it is).
func CountAuthorities(b []byte) int {
	n := 0
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return n
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		if c, err := x509.ParseCertificate(blk.Bytes); err == nil && (c.IsCA || c.Version < 3) {
			n++
		}
	}
}
