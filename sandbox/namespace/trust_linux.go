//go:build linux && (amd64 || arm64)

package namespace

import (
	"bytes"
	"context"
	"encoding/pem"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/codeagent/codeagent/sandbox"
)

// A sandbox trusts what the host trusts: its /etc/ssl/certs (the hashed
// directory OpenSSL reads, and Debian's bundle in it), OpenSSL's settings,
// and the host's bundle (what SSL_CERT_FILE and SSL_CERT_DIR name on the
// host where set, else the distribution's) at every path where the
// host's runtimes, which the sandbox shares, look for one. Nothing else of
// /etc/ssl is copied: never /etc/ssl/private.

// debianBundle is where Debian's OpenSSL, Python, pip and curl read the
// bundle; the sandbox always has the host's bundle there.
const debianBundle = "/etc/ssl/certs/ca-certificates.crt"

// bundleFiles are the bundles distributions keep (Go's crypto/x509 reads
// the same list): each that the host has gets the host's bundle in the
// sandbox.
var bundleFiles = []string{
	debianBundle,
	"/etc/pki/tls/certs/ca-bundle.crt",
	"/etc/ssl/ca-bundle.pem",
	"/etc/pki/tls/cacert.pem",
	"/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
	"/etc/ssl/cert.pem",
}

// maxTrustFile bounds a file read into the trust store.
const maxTrustFile = 8 << 20

// trustSource is where the host's bundle comes from.
type trustSource struct {
	file string   // SSL_CERT_FILE, or the first of bundleFiles the host has; "" for none
	dirs []string // SSL_CERT_DIR's directories, when set
	env  bool     // file came from SSL_CERT_FILE
}

// hostTrustSource reads SSL_CERT_FILE and SSL_CERT_DIR of this process,
// else finds the distribution's bundle.
func hostTrustSource() trustSource {
	var s trustSource
	if f := os.Getenv("SSL_CERT_FILE"); f != "" {
		s.file, s.env = f, true
	} else {
		for _, f := range bundleFiles {
			if fi, err := os.Stat(f); err == nil && fi.Mode().IsRegular() {
				s.file = f
				break
			}
		}
	}
	if d := os.Getenv("SSL_CERT_DIR"); d != "" {
		for _, p := range filepath.SplitList(d) {
			if p != "" {
				s.dirs = append(s.dirs, p)
			}
		}
	}
	return s
}

// describe says where the bundle comes from, for people.
func (s trustSource) describe() string {
	var parts []string
	switch {
	case s.env:
		parts = append(parts, "SSL_CERT_FILE="+s.file)
	case s.file != "":
		parts = append(parts, s.file)
	}
	if len(s.dirs) > 0 {
		parts = append(parts, "SSL_CERT_DIR="+strings.Join(s.dirs, string(filepath.ListSeparator)))
	}
	if len(parts) == 0 {
		return "no bundle on the host"
	}
	return "the host's " + strings.Join(parts, " and ")
}

// bundle is the host's bundle: the file's certificates, then those of the
// directories' files that the file does not have.
func (s trustSource) bundle() ([]byte, error) {
	var out []byte
	if s.file != "" {
		b, err := readTrustFile(s.file)
		if err != nil {
			return nil, fmt.Errorf("the host's certificate bundle: %w", err)
		}
		out = b
	}
	seen := map[string]bool{}
	for rest := out; ; {
		var blk *pem.Block
		if blk, rest = pem.Decode(rest); blk == nil {
			break
		}
		seen[string(blk.Bytes)] = true
	}
	for _, d := range s.dirs {
		ents, err := os.ReadDir(d)
		if err != nil {
			continue // as OpenSSL and Go skip a directory they cannot read
		}
		for _, e := range ents {
			b, err := readTrustFile(filepath.Join(d, e.Name()))
			if err != nil {
				continue
			}
			for rest := b; ; {
				var blk *pem.Block
				if blk, rest = pem.Decode(rest); blk == nil {
					break
				}
				if blk.Type == "CERTIFICATE" && !seen[string(blk.Bytes)] {
					seen[string(blk.Bytes)] = true
					out = append(out, pem.EncodeToMemory(blk)...)
				}
			}
		}
	}
	return out, nil
}

// readTrustFile reads a regular file (through links) of at most
// maxTrustFile bytes.
func readTrustFile(p string) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() || fi.Size() > maxTrustFile {
		return nil, fmt.Errorf("%s: not a regular file of at most %d bytes", p, maxTrustFile)
	}
	return io.ReadAll(io.LimitReader(f, maxTrustFile))
}

// prepareTrust writes the sandbox's trust store into the prepared /etc
// dir: a copy of /etc/ssl/certs and /etc/ssl/openssl.cnf, then the host's
// bundle at debianBundle and at each of bundleFiles the host has.
func prepareTrust(dir string, s trustSource) error {
	if err := copyCertDir("/etc/ssl/certs", filepath.Join(dir, "ssl/certs")); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("copy /etc/ssl/certs: %w", err)
	}
	if b, err := readTrustFile("/etc/ssl/openssl.cnf"); err == nil {
		if err := writeEtcFile(dir, "/etc/ssl/openssl.cnf", b); err != nil {
			return err
		}
	}
	b, err := s.bundle()
	if err != nil || len(b) == 0 {
		return err
	}
	for _, f := range bundleFiles {
		if _, err := os.Stat(f); f == debianBundle || err == nil {
			if err := writeEtcFile(dir, f, b); err != nil {
				return err
			}
		}
	}
	return nil
}

// writeEtcFile writes data at the path p of /etc in the prepared dir,
// replacing what a copy put there.
func writeEtcFile(dir, p string, data []byte) error {
	target := filepath.Join(dir, strings.TrimPrefix(p, "/etc/"))
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return err
	}
	if err := os.Remove(target); err != nil && !os.IsNotExist(err) {
		return err
	}
	return os.WriteFile(target, data, 0o644)
}

// copyCertDir copies a certificate directory: its links that stay in it
// (OpenSSL's hash names) or lead into /usr (which every sandbox sees) as
// links, the files of other links as files, subdirectories likewise.
func copyCertDir(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(target, 0o755)
		case d.Type()&fs.ModeSymlink != 0:
			link, err := os.Readlink(p)
			if err != nil {
				return err
			}
			if keepLink(link) {
				return os.Symlink(link, target)
			}
			b, err := readTrustFile(p)
			if err != nil {
				return nil // a dangling or odd link is left out, as OpenSSL skips it
			}
			return os.WriteFile(target, b, 0o644)
		case d.Type().IsRegular():
			b, err := readTrustFile(p)
			if err != nil {
				return nil
			}
			return os.WriteFile(target, b, 0o644)
		}
		return nil
	})
}

// keepLink says a link resolves the same in the sandbox: into its own
// directory, or into /usr.
func keepLink(link string) bool {
	if path.IsAbs(link) {
		return strings.HasPrefix(path.Clean(link), "/usr/")
	}
	return !strings.Contains(link, "/") && link != ".." && link != "."
}

// appendTrust appends to an /etc fingerprint what prepareTrust reads: the
// environment's choices and the files and directories behind them.
func appendTrust(buf []byte, s trustSource) ([]byte, error) {
	buf = fmt.Appendf(buf, "trust %q %q\n", s.file, s.dirs)
	var err error
	for _, p := range append([]string{"/etc/ssl/certs", "/etc/ssl/openssl.cnf"}, s.dirs...) {
		if buf, err = appendTree(buf, p); err != nil {
			return buf, err
		}
	}
	for _, f := range append([]string{s.file}, bundleFiles...) {
		if fi, err := os.Stat(f); err == nil {
			buf = fmt.Appendf(buf, "bundle %s %d %d\n", f, fi.Size(), fi.ModTime().UnixNano())
		}
	}
	return buf, nil
}

// TrustStore implements sandbox.Truster: the bundle every sandbox of b
// has at /etc/ssl/certs/ca-certificates.crt.
func (b *Backend) TrustStore(ctx context.Context) (sandbox.TrustStore, error) {
	data, err := os.ReadFile(filepath.Join(b.etc, "ssl/certs/ca-certificates.crt"))
	if err != nil && !os.IsNotExist(err) {
		return sandbox.TrustStore{}, fmt.Errorf("the sandbox's certificate bundle: %w", err)
	}
	data = bytes.TrimRight(data, "\n")
	if len(data) > 0 {
		data = append(data, '\n')
	}
	return sandbox.TrustStore{Source: b.trust.describe(), PEM: data, Authorities: sandbox.CountAuthorities(data)}, nil
}

// HostTrustStore is what a sandbox of this host would trust, without a
// backend (for doctor).
func HostTrustStore() (sandbox.TrustStore, error) {
	s := hostTrustSource()
	b, err := s.bundle()
	if err != nil {
		return sandbox.TrustStore{Source: s.describe()}, err
	}
	return sandbox.TrustStore{Source: s.describe(), PEM: b, Authorities: sandbox.CountAuthorities(b)}, nil
}
