package egress

import (
	"net/netip"
	"strings"
	"testing"
)

func TestParseRule(t *testing.T) {
	good := map[string]string{
		"api.example.com":      "api.example.com",
		"*.github.com:443":     "*.github.com:443",
		"Files.Example.org:80": "Files.Example.org:80",
		"10.0.0.5:8080":        "10.0.0.5:8080",
		"[fd00::1]:443":        "[fd00::1]:443",
		"fd00::1":              "fd00::1",
		"pypi.test":            "pypi.test",
	}
	for in, want := range good {
		r, err := ParseRule(in)
		if err != nil || r.String() != want {
			t.Errorf("ParseRule(%q) = %v, %v", in, r, err)
		}
	}
	for _, bad := range []string{"", "*", "*.com", "a.*.com", "exa mple.com", "host:0", "host:65536", "host:http",
		"127.1", "2130706433", "0x7f.1", "-a.com", "a..com", "[::1", "héllo.com", "fe80::1%eth0"} {
		if _, err := ParseRule(bad); err == nil {
			t.Errorf("ParseRule(%q) accepted", bad)
		}
	}
}

func TestDecide(t *testing.T) {
	p, err := NewPolicy([]string{"api.example.com", "*.github.com:443", "files.example.org:80", "10.0.0.5:8080"})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		host string
		port int
		rule string // "" when refused
		why  string
	}{
		{"api.example.com", 443, "api.example.com", ""},
		{"API.example.com.", 80, "api.example.com", ""},
		{"api.example.com", 8080, "", "port 8080 is not allowed"},
		{"raw.github.com", 443, "*.github.com:443", ""},
		{"a.b.github.com", 443, "*.github.com:443", ""},
		{"github.com", 443, "", "not in the allow list"},
		{"raw.github.com", 80, "", "port 80"},
		{"evilgithub.com", 443, "", "not in the allow list"},
		{"files.example.org", 80, "files.example.org:80", ""},
		{"files.example.org", 443, "", "port 443"},
		{"10.0.0.5", 8080, "10.0.0.5:8080", ""},
		{"10.0.0.5", 80, "", "IP address"},
		{"127.0.0.1", 80, "", "IP address"},
		{"[::ffff:10.0.0.5]", 8080, "10.0.0.5:8080", ""},
		{"evil.example", 443, "", "not in the allow list"},
	}
	for _, c := range cases {
		host, ip, err := normalizeHost(c.host)
		if err != nil {
			t.Fatalf("%s: %v", c.host, err)
		}
		r, why := p.decide(host, ip, c.port)
		if r.text != c.rule || (c.why != "" && !strings.Contains(why, c.why)) {
			t.Errorf("%s:%d: rule %q, refusal %q; want %q, %q", c.host, c.port, r.text, why, c.rule, c.why)
		}
	}
	for _, h := range []string{"127.1", "2130706433", "0x7f000001", "a b", "x/y", ""} {
		if _, _, err := normalizeHost(h); err == nil {
			t.Errorf("normalizeHost(%q) accepted", h)
		}
	}
}

// TestListedAddressOpensOnlyItsPorts: a listed IP address lifts the
// refusal of names that resolve to it only on the ports listed with it, so
// that allowing 127.0.0.1:8080 does not open the host's other local
// services to every listed name that resolves to loopback.
func TestListedAddressOpensOnlyItsPorts(t *testing.T) {
	p, err := NewPolicy([]string{"127.0.0.1:8080", "10.0.0.5", "allowed.test:22", "allowed.test:8080", "allowed.test"})
	if err != nil {
		t.Fatal(err)
	}
	loop, private := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("10.0.0.5")
	mapped := netip.MustParseAddr("::ffff:127.0.0.1")
	cases := []struct {
		addr netip.Addr
		port int
		why  string // "" when admitted
	}{
		{loop, 8080, ""},
		{mapped, 8080, ""},
		{loop, 22, "resolves to 127.0.0.1, a loopback address, which is reached only when listed itself with port 22"},
		{mapped, 22, "resolves to 127.0.0.1"},
		{loop, 80, "resolves to 127.0.0.1"},
		{private, 80, ""}, // listed without a port: 80 and 443
		{private, 443, ""},
		{private, 8080, "resolves to 10.0.0.5, a private address"},
		{private, 22, "resolves to 10.0.0.5, a private address"},
	}
	for _, c := range cases {
		if _, why := p.decide("allowed.test", netip.Addr{}, c.port); why != "" {
			t.Fatalf("allowed.test:%d: %s", c.port, why)
		}
		got, why := p.resolved("allowed.test", []netip.Addr{c.addr}, c.port)
		switch {
		case c.why == "" && (why != "" || len(got) != 1 || got[0] != netip.AddrPortFrom(c.addr.Unmap(), uint16(c.port))):
			t.Errorf("%s:%d: %v, refused %q; want it admitted", c.addr, c.port, got, why)
		case c.why != "" && (!strings.Contains(why, c.why) || got != nil):
			t.Errorf("%s:%d: %v, refused %q; want refused with %q", c.addr, c.port, got, why, c.why)
		}
	}
	// One address on an unlisted port refuses the name, as one private
	// address among public ones does.
	pub := netip.MustParseAddr("93.184.216.34")
	if got, why := p.resolved("allowed.test", []netip.Addr{pub, loop}, 22); why == "" {
		t.Errorf("a public and a loopback address on port 22: admitted %v", got)
	}
	if got, why := p.resolved("allowed.test", []netip.Addr{pub, loop}, 8080); why != "" || len(got) != 2 {
		t.Errorf("a public and the listed address on its port: %v, refused %q", got, why)
	}
}

func TestAddrKind(t *testing.T) {
	for a, public := range map[string]bool{
		"93.184.216.34": true, "2606:2800:220:1::": true, "8.8.8.8": true,
		"127.0.0.1": false, "127.5.5.5": false, "::1": false, "10.1.2.3": false, "172.20.0.1": false,
		"192.168.1.1": false, "169.254.169.254": false, "fe80::1": false, "fc00::1": false, "fd12::1": false,
		"100.64.0.1": false, "0.0.0.0": false, "::": false, "224.0.0.1": false, "255.255.255.255": false,
		"::ffff:127.0.0.1": false, "64:ff9b::7f00:1": false, "2002:7f00:1::": false, "2001:db8::1": false,
		"::127.0.0.1": false, "198.18.0.1": false,
	} {
		if got := addrKind(netip.MustParseAddr(a)) == ""; got != public {
			t.Errorf("%s: public %v, want %v (%s)", a, got, public, addrKind(netip.MustParseAddr(a)))
		}
	}
}

func TestWithin(t *testing.T) {
	ceiling := []string{"*.github.com", "pypi.org:443", "files.example.org", "10.0.0.5:8080"}
	for _, ok := range [][]string{nil, {"api.github.com"}, {"*.github.com:443"}, {"*.raw.github.com"}, {"pypi.org:443"},
		{"files.example.org:80", "10.0.0.5:8080"}} {
		if err := Within(ok, ceiling, "the server's ceiling"); err != nil {
			t.Errorf("Within(%v): %v", ok, err)
		}
	}
	for _, wide := range [][]string{{"github.com"}, {"*.com.github.com.evil"}, {"pypi.org"}, {"pypi.org:80"}, {"10.0.0.5"},
		{"10.0.0.6:8080"}, {"evil.example"}} {
		err := Within(wide, ceiling, "the server's ceiling")
		if err == nil || !strings.Contains(err.Error(), wide[0]) {
			t.Errorf("Within(%v) = %v, want a refusal naming it", wide, err)
		}
	}
	if err := Within([]string{"api.github.com"}, nil, "the server's ceiling"); err == nil || !strings.Contains(err.Error(), "allows no network") {
		t.Errorf("empty ceiling: %v", err)
	}
}

func TestParseResolve(t *testing.T) {
	m, err := ParseResolve([]string{"pypi.test=127.0.0.1:8080", "Files.Test.=[::1]:9"})
	if err != nil || m["pypi.test"] != "127.0.0.1:8080" || m["files.test"] != "[::1]:9" {
		t.Fatalf("%v %v", m, err)
	}
	for _, bad := range []string{"pypi.test", "pypi.test=127.0.0.1", "127.0.0.1=127.0.0.1:80", "x=name:80"} {
		if _, err := ParseResolve([]string{bad}); err == nil {
			t.Errorf("ParseResolve(%q) accepted", bad)
		}
	}
}
