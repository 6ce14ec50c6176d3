package main

import (
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/codeagent/codeagent/app"
	"github.com/codeagent/codeagent/egress"
	"github.com/codeagent/codeagent/manifest"
	"github.com/codeagent/codeagent/sandbox"
)

// networkFlags are the network flags of exec and run: the allow list,
// its byte cap, and the resolve overrides that tests use.
type networkFlags struct {
	allow    []string
	maxBytes int64
	resolve  []string
	ca       caFlag
}

func (n *networkFlags) register(fs *flag.FlagSet) {
	fs.Var(allowFlag{&n.allow}, "allow-host", "let programs reach HOST[:PORT] (repeatable; *.example.com for subdomains; no port: 80, 443)")
	sizeVar(fs, &n.maxBytes, "egress-max-bytes", sizeBounds{min: 1, max: 1 << 40}, "bytes in and out of one program's connections together (default 100MiB)")
	fs.Var(resolveFlag{&n.resolve}, "egress-resolve", "for tests: resolve NAME to ADDR:PORT, as curl's --resolve (repeatable; in the result)")
	fs.Var(&n.ca, "ca-cert", "also trust the certificate authorities of this PEM file, in HTTPS and installs (repeatable)")
}

// network is the network of a Spec: the --allow-host list, which must stay
// within a manifest's when one is given (its list applies when the flag is
// not), or nil for no network; and the authorities that it and package
// installs trust besides the sandbox's own (--ca-cert, the manifest's
// network.ca_certs).
func (n *networkFlags) network(m *manifest.Manifest) (*sandbox.Network, []byte, error) {
	res, err := egress.ParseResolve(n.resolve)
	if err != nil {
		return nil, nil, usageError{err}
	}
	b := app.NetworkBounds{Manifest: m, ManifestDefault: true, CACerts: n.ca.pem}
	nw, err := app.Network(app.NetworkRequest{Allow: n.allow, MaxBytes: n.maxBytes, Resolve: res}, b)
	if err != nil {
		return nil, nil, usagef("network: %w", err)
	}
	return nw, b.Trust(), nil
}

// caFlag collects --ca-cert FILE, each file read and checked as it is
// given: one that is not PEM certificates is a usage error naming it.
type caFlag struct {
	files []string
	pem   []byte
}

func (f *caFlag) String() string { return strings.Join(f.files, ",") }

func (f *caFlag) Set(s string) error {
	b, err := app.ReadCACerts([]string{s})
	if err != nil {
		return err
	}
	if len(f.pem)+len(b) > sandbox.MaxCACerts {
		return fmt.Errorf("the certificate files come to more than %s", sandbox.FormatSize(sandbox.MaxCACerts))
	}
	f.files, f.pem = append(f.files, s), app.JoinPEM(f.pem, b)
	return nil
}

// allowFlag collects --allow-host, each entry checked as it is given.
type allowFlag struct{ list *[]string }

func (f allowFlag) String() string { return "" }

func (f allowFlag) Set(s string) error {
	if _, err := egress.ParseRule(s); err != nil {
		return err
	}
	*f.list = append(*f.list, s)
	return nil
}

// resolveFlag collects --egress-resolve NAME=ADDR:PORT.
type resolveFlag struct{ list *[]string }

func (f resolveFlag) String() string { return "" }

func (f resolveFlag) Set(s string) error {
	if _, err := egress.ParseResolve([]string{s}); err != nil {
		return err
	}
	*f.list = append(*f.list, s)
	return nil
}

// printRefused says on w which connections the proxy refused.
func printRefused(w io.Writer, e *sandbox.Egress) {
	for _, h := range e.JSON().RefusedHosts() {
		printErr(w, "network: refused %s", h)
	}
	if e != nil && len(e.Resolve) > 0 {
		var pairs []string
		for name, addr := range e.Resolve {
			pairs = append(pairs, name+"="+addr)
		}
		sort.Strings(pairs)
		printErr(w, "network: names resolved by --egress-resolve, not DNS: %s", strings.Join(pairs, ", "))
	}
}

// ceilingFlags are the network flags of serve and mcp: the widest network
// a request may ask for, its byte cap, and resolve overrides for tests.
type ceilingFlags struct {
	ceiling  []string
	maxBytes int64
	resolve  []string
	ca       caFlag
}

func (c *ceilingFlags) register(fs *flag.FlagSet) {
	fs.Var(allowFlag{&c.ceiling}, "egress-ceiling", "a host requests may let programs reach (repeatable; default: none, no network)")
	sizeVar(fs, &c.maxBytes, "egress-max-bytes", sizeBounds{min: 1, max: 1 << 40}, "most bytes a request may let a program's connections move in and out (default 100MiB)")
	fs.Var(resolveFlag{&c.resolve}, "egress-resolve", "for tests: resolve NAME to ADDR:PORT in every program (repeatable; in each result)")
	fs.Var(&c.ca, "ca-cert", "also trust this PEM file's certificate authorities, in every program (repeatable)")
}

// resolveMap checks the flags together and returns the resolve overrides.
func (c *ceilingFlags) resolveMap() (map[string]string, error) {
	if len(c.resolve) > 0 && len(c.ceiling) == 0 {
		return nil, usagef("--egress-resolve needs --egress-ceiling")
	}
	if len(c.ca.files) > 0 && len(c.ceiling) == 0 {
		return nil, usagef("--ca-cert needs --egress-ceiling: without a network no program or install reaches a host that it would trust")
	}
	m, err := egress.ParseResolve(c.resolve)
	if err != nil {
		return nil, usageError{err}
	}
	return m, nil
}
