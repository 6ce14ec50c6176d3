package main

import (
	"flag"
	"io"
	"sort"
	"strings"

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
}

func (n *networkFlags) register(fs *flag.FlagSet) {
	fs.Var(allowFlag{&n.allow}, "allow-host", "let programs reach HOST[:PORT] through codeagent's proxy (repeatable; *.example.com for names below; no port: 80 and 443)")
	sizeVar(fs, &n.maxBytes, "egress-max-bytes", sizeBounds{min: 1, max: 1 << 40}, "bytes in and out of one program's connections together (default 100MiB)")
	fs.Var(resolveFlag{&n.resolve}, "egress-resolve", "for tests: map NAME to ADDR:PORT instead of DNS, like curl's --resolve (repeatable; recorded with the result)")
}

// network is the network of a Spec: the --allow-host list, which must stay
// within a manifest's when one is given (its list applies when the flag is
// not), or nil for no network.
func (n *networkFlags) network(m *manifest.Manifest) (*sandbox.Network, error) {
	var nw *sandbox.Network
	var ceiling *sandbox.Network
	if m != nil {
		ceiling = m.Network()
	}
	switch {
	case len(n.allow) > 0 && m != nil:
		var lim []string
		if ceiling != nil {
			lim = ceiling.Allow
		}
		if err := egress.Within(n.allow, lim, "the manifest "+m.File()); err != nil {
			return nil, usagef("--allow-host: %w", err)
		}
		nw = &sandbox.Network{Allow: n.allow}
		if ceiling != nil {
			nw.MaxBytes = ceiling.MaxBytes
		}
	case len(n.allow) > 0:
		nw = &sandbox.Network{Allow: n.allow}
	case ceiling != nil:
		nw = ceiling
	}
	if nw == nil {
		if len(n.resolve) > 0 || n.maxBytes > 0 {
			return nil, usagef("--egress-resolve and --egress-max-bytes need a network: give --allow-host")
		}
		return nil, nil
	}
	if n.maxBytes > 0 {
		if nw.MaxBytes > 0 && n.maxBytes > nw.MaxBytes {
			return nil, usagef("--egress-max-bytes %s is more than the manifest's max_bytes, %s", sandbox.FormatSize(n.maxBytes), sandbox.FormatSize(nw.MaxBytes))
		}
		nw.MaxBytes = n.maxBytes
	}
	res, err := egress.ParseResolve(n.resolve)
	if err != nil {
		return nil, usageError{err}
	}
	nw.Resolve = res
	return nw, nil
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
}

func (c *ceilingFlags) register(fs *flag.FlagSet) {
	fs.Var(allowFlag{&c.ceiling}, "egress-ceiling", "HOST[:PORT] that requests may let programs reach (repeatable); a request's allow list must stay within these (default: none, no network)")
	sizeVar(fs, &c.maxBytes, "egress-max-bytes", sizeBounds{min: 1, max: 1 << 40}, "most bytes in and out of one program's connections a request may ask for (default 100MiB)")
	fs.Var(resolveFlag{&c.resolve}, "egress-resolve", "for tests: map NAME to ADDR:PORT instead of DNS for every program (repeatable; recorded with each result)")
}

func (c *ceilingFlags) resolveMap() (map[string]string, error) {
	if len(c.resolve) > 0 && len(c.ceiling) == 0 {
		return nil, usagef("--egress-resolve needs --egress-ceiling")
	}
	m, err := egress.ParseResolve(c.resolve)
	if err != nil {
		return nil, usageError{err}
	}
	return m, nil
}
