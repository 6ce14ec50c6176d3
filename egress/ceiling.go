package egress

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"
)

// CeilingError says that an allow-list entry reaches beyond a ceiling.
type CeilingError struct {
	Rule    string   // the entry
	What    string   // the ceiling, for people: "the manifest m.yaml"
	Ceiling []string // its entries
}

func (e *CeilingError) Error() string {
	if len(e.Ceiling) == 0 {
		return fmt.Sprintf("network access to %s is not allowed: %s allows no network", e.Rule, e.What)
	}
	return fmt.Sprintf("network access to %s is wider than %s (%s)", e.Rule, e.What, strings.Join(e.Ceiling, ", "))
}

// Within checks that every entry of allow is covered by the ceiling: a
// server's own allow list (serve --egress-ceiling), a manifest's, beyond
// which no request may reach. An empty ceiling allows nothing, so any
// entry is refused. A bad entry is a *RuleError; one wider than the
// ceiling a *CeilingError naming it.
func Within(allow, ceiling []string, what string) error {
	if len(allow) == 0 {
		return nil
	}
	req, err := NewPolicy(allow)
	if err != nil {
		return err
	}
	lim, err := NewPolicy(ceiling)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	for _, r := range req.rules {
		if !lim.covers(r) {
			return &CeilingError{Rule: r.text, What: what, Ceiling: lim.Rules()}
		}
	}
	return nil
}

// covers reports whether every host and port r admits is admitted by a
// rule of p.
func (p *Policy) covers(r Rule) bool {
	ports := []int{r.port}
	if r.port == 0 {
		ports = webPorts
	}
	for _, port := range ports {
		ok := false
		for _, c := range p.rules {
			if c.portMatches(port) && c.coversHost(r) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// coversHost reports whether every host r names is one c names.
func (c Rule) coversHost(r Rule) bool {
	switch {
	case c.ip.IsValid() || r.ip.IsValid():
		return c.ip.IsValid() && r.ip == c.ip
	case c.wildcard && r.wildcard:
		return r.name == c.name || strings.HasSuffix(r.name, "."+c.name)
	case c.wildcard:
		return strings.HasSuffix(r.name, "."+c.name)
	case r.wildcard:
		return false
	}
	return c.name == r.name
}

// ParseResolve reads resolve overrides "NAME=ADDR:PORT" (like curl's
// --resolve): connections to NAME, on any port, go to ADDR:PORT instead of
// what DNS says. They are for tests, which serve on loopback.
func ParseResolve(entries []string) (map[string]string, error) {
	if len(entries) == 0 {
		return nil, nil
	}
	out := map[string]string{}
	for _, e := range entries {
		name, addr, ok := strings.Cut(e, "=")
		if !ok {
			return nil, fmt.Errorf("resolve %q: want NAME=ADDR:PORT", e)
		}
		if _, err := parseResolveEntry(name, addr); err != nil {
			return nil, err
		}
		out[strings.ToLower(strings.TrimSuffix(name, "."))] = addr
	}
	return out, nil
}

func parseResolveEntry(name, addr string) (netip.AddrPort, error) {
	n := strings.ToLower(strings.TrimSuffix(name, "."))
	if err := checkName(n); err != nil {
		return netip.AddrPort{}, fmt.Errorf("resolve %s: %w", name, err)
	}
	ap, err := netip.ParseAddrPort(addr)
	if err != nil || ap.Port() == 0 {
		return netip.AddrPort{}, fmt.Errorf("resolve %s=%s: want ADDR:PORT", name, addr)
	}
	return ap, nil
}

// resolveTable parses overrides already checked by ParseResolve.
func resolveTable(m map[string]string) (map[string]netip.AddrPort, error) {
	out := make(map[string]netip.AddrPort, len(m))
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		ap, err := parseResolveEntry(n, m[n])
		if err != nil {
			return nil, err
		}
		out[strings.ToLower(strings.TrimSuffix(n, "."))] = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	}
	return out, nil
}
