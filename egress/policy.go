// Package egress gives sandboxed programs the network by allow list. The
// sandbox keeps no route out; a program reaches the network only through
// an HTTP proxy that codeagent runs outside the sandbox, on a listener that
// the backend opens on the sandbox's own loopback (see sandbox.Gateway).
// The proxy decides every connection by host name and port against the
// allow list, resolves names itself, refuses IP literals and names that
// resolve to loopback, private or link-local addresses unless those are
// listed, counts and caps the bytes, and records every attempt.
package egress

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Rule is one entry of an allow list.
type Rule struct {
	text     string
	name     string // lower case; for a wildcard, the part after "*."
	wildcard bool   // "*.example.com": every name below example.com
	ip       netip.Addr
	port     int // 0: the web's ports, 80 and 443
}

// webPorts are the ports of a rule written without one.
var webPorts = []int{80, 443}

func (r Rule) String() string { return r.text }

// RuleError is an allow-list entry that cannot be read.
type RuleError struct {
	Rule string
	Err  error
}

func (e *RuleError) Error() string { return fmt.Sprintf("allow %q: %v", e.Rule, e.Err) }
func (e *RuleError) Unwrap() error { return e.Err }

// ParseRule reads one allow-list entry: a host name ("api.example.com"), a
// wildcard ("*.github.com", every name below github.com but not itself), or
// an IP address ("10.0.0.5", "[fd00::1]"), each optionally with ":PORT";
// without a port, 80 and 443 are allowed.
func ParseRule(s string) (Rule, error) {
	r, err := parseRule(s)
	if err != nil {
		return Rule{}, &RuleError{Rule: s, Err: err}
	}
	return r, nil
}

func parseRule(s string) (Rule, error) {
	text := strings.TrimSpace(s)
	host, port, err := splitRule(strings.ToLower(text))
	if err != nil {
		return Rule{}, err
	}
	r := Rule{text: text, port: port}
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Zone() != "" {
			return Rule{}, errors.New("an address with a zone")
		}
		r.ip = a.Unmap()
		return r, nil
	}
	if rest, ok := strings.CutPrefix(host, "*."); ok {
		r.wildcard, host = true, rest
		if !strings.Contains(host, ".") {
			return Rule{}, errors.New("a wildcard needs a domain of at least two labels (*.example.com)")
		}
	}
	if host == "*" || strings.Contains(host, "*") {
		return Rule{}, errors.New("'*' may only start a name (*.example.com); an allow list names hosts")
	}
	if err := checkName(host); err != nil {
		return Rule{}, err
	}
	r.name = host
	return r, nil
}

// splitRule splits "host", "host:port", "[v6]", "[v6]:port" or a bare v6.
func splitRule(s string) (string, int, error) {
	if s == "" {
		return "", 0, errors.New("empty")
	}
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return "", 0, errors.New("missing ']'")
		}
		host, rest := s[1:end], s[end+1:]
		if rest == "" {
			return host, 0, nil
		}
		p, ok := strings.CutPrefix(rest, ":")
		if !ok {
			return "", 0, errors.New("want [ADDRESS]:PORT")
		}
		port, err := parsePort(p)
		return host, port, err
	}
	if strings.Count(s, ":") > 1 {
		return s, 0, nil // a bare IPv6 address
	}
	host, p, ok := strings.Cut(s, ":")
	if !ok {
		return s, 0, nil
	}
	port, err := parsePort(p)
	return host, port, err
}

func parsePort(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 65535 || s[0] == '+' || s[0] == '0' {
		return 0, fmt.Errorf("port %q: want a number from 1 to 65535", s)
	}
	return n, nil
}

// checkName accepts a DNS host name in lower case, without a final dot.
// A name whose last label is a number is an IP address in another form
// (127.1, 2130706433) and is refused.
func checkName(h string) error {
	if h == "" || len(h) > 253 {
		return errors.New("not a host name")
	}
	labels := strings.Split(h, ".")
	for _, l := range labels {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return fmt.Errorf("%q is not a host name", h)
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return fmt.Errorf("%q is not a host name (letters, digits, '-' and '.'; write international names in their xn-- form)", h)
			}
		}
	}
	if numeric(labels[len(labels)-1]) {
		return fmt.Errorf("%q is an IP address in another form: write it as an address", h)
	}
	return nil
}

// numeric reports whether a label is a number, decimal or 0x hex, as the
// last part of an address in inet_aton's forms (127.1, 0x7f.1).
func numeric(l string) bool {
	digits := "0123456789"
	if rest, ok := strings.CutPrefix(l, "0x"); ok {
		l, digits = rest, "0123456789abcdef"
	}
	for i := 0; i < len(l); i++ {
		if !strings.ContainsRune(digits, rune(l[i])) {
			return false
		}
	}
	return true
}

// matches reports whether the rule admits host (normalized) on port.
func (r Rule) matches(host string, ip netip.Addr, port int) bool {
	if !r.portMatches(port) {
		return false
	}
	return r.hostMatches(host, ip)
}

func (r Rule) portMatches(port int) bool {
	if r.port == 0 {
		return port == 80 || port == 443
	}
	return port == r.port
}

func (r Rule) hostMatches(host string, ip netip.Addr) bool {
	switch {
	case r.ip.IsValid():
		return ip.IsValid() && ip == r.ip
	case ip.IsValid():
		return false
	case r.wildcard:
		return strings.HasSuffix(host, "."+r.name)
	}
	return host == r.name
}

// Policy is a parsed allow list.
type Policy struct {
	rules []Rule
}

// NewPolicy parses an allow list; every bad entry is reported.
func NewPolicy(allow []string) (*Policy, error) {
	p := &Policy{}
	var errs []error
	for _, s := range allow {
		r, err := ParseRule(s)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		p.rules = append(p.rules, r)
	}
	return p, errors.Join(errs...)
}

// Rules are the entries as written.
func (p *Policy) Rules() []string {
	out := make([]string, len(p.rules))
	for i, r := range p.rules {
		out[i] = r.text
	}
	return out
}

// decide returns the rule that admits host:port, or a refusal saying why.
// host is normalized; ip is valid when host is an IP literal.
func (p *Policy) decide(host string, ip netip.Addr, port int) (Rule, string) {
	for _, r := range p.rules {
		if r.matches(host, ip, port) {
			return r, ""
		}
	}
	if ip.IsValid() {
		return Rule{}, "an IP address that is not in the allow list: connect by a listed host name"
	}
	for _, r := range p.rules {
		if r.hostMatches(host, ip) {
			return Rule{}, fmt.Sprintf("port %d is not allowed for %s (rule %s)", port, host, r.text)
		}
	}
	return Rule{}, "not in the allow list"
}

// resolved decides the addresses a name admitted by decide resolved to:
// every one must be public unless the address itself is listed with this
// port (one non-public address refuses the name: a rebinding answer mixes
// them). It returns the addresses to dial, or a refusal saying why.
func (p *Policy) resolved(host string, addrs []netip.Addr, port int) ([]netip.AddrPort, string) {
	out := make([]netip.AddrPort, 0, len(addrs))
	for _, a := range addrs {
		a = a.Unmap()
		if kind := addrKind(a); kind != "" && !p.listed(a, port) {
			return nil, fmt.Sprintf("%s resolves to %s, a %s address, which is reached only when listed itself with port %d", host, a, kind, port)
		}
		out = append(out, netip.AddrPortFrom(a, uint16(port)))
	}
	return out, ""
}

// listed reports whether the address itself is in the allow list with
// port, by the rule that admits it as an IP literal: listing 127.0.0.1:8080
// opens 127.0.0.1's port 8080 to names that resolve to it, not its other
// ports (a rule without a port: 80 and 443).
func (p *Policy) listed(a netip.Addr, port int) bool {
	a = a.Unmap()
	for _, r := range p.rules {
		if r.ip.IsValid() && r.ip == a && r.portMatches(port) {
			return true
		}
	}
	return false
}

// normalizeHost lower-cases h, drops a final dot and brackets, and says
// whether it is an IP literal; err when it is neither a name nor an
// address.
func normalizeHost(h string) (string, netip.Addr, error) {
	h = strings.TrimSuffix(strings.ToLower(h), ".")
	if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
		h = h[1 : len(h)-1]
	}
	if a, err := netip.ParseAddr(h); err == nil {
		if a.Zone() != "" {
			return h, netip.Addr{}, errors.New("an address with a zone")
		}
		return a.Unmap().String(), a.Unmap(), nil
	}
	if err := checkName(h); err != nil {
		return h, netip.Addr{}, err
	}
	return h, netip.Addr{}, nil
}
