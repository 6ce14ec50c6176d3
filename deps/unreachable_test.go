package deps

import (
	"testing"

	"github.com/codeagent/codeagent/sandbox"
)

// Why an index could not be reached: the proxy's record decides for a
// connection that never opened, the installer's error for TLS and read
// timeouts; an index that answered is not unreachable.
func TestUnreachable(t *testing.T) {
	const ix = "https://pypi.test/simple/"
	conn := func(reason string, in int64) *sandbox.Egress {
		return &sandbox.Egress{Connections: []sandbox.Connection{{Method: "CONNECT", Host: "pypi.test", Port: 443, Allowed: true, Reason: reason, BytesIn: in}}}
	}
	pipTLS := "WARNING: Retrying (Retry(total=1)) after connection broken by 'SSLError(SSLCertVerificationError(1, '[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: unable to get local issuer certificate (_ssl.c:992)'))': /simple/x/\n"
	npmTLS := "npm error code SELF_SIGNED_CERT_IN_CHAIN\nnpm error errno SELF_SIGNED_CERT_IN_CHAIN\nnpm error request to https://pypi.test/x failed, reason: self-signed certificate in certificate chain\n"
	for _, c := range []struct {
		name string
		e    *sandbox.Egress
		out  string
		want string
	}{
		{"refused", conn("cannot connect: dial tcp 10.0.0.1:443: connect: connection refused", 0), "", "connection refused"},
		{"dial timeout", conn("cannot connect: dial tcp 10.0.0.1:443: i/o timeout", 0), "", "the connection timed out"},
		{"no such name", conn("pypi.test does not resolve: lookup pypi.test: no such host", 0), "", "pypi.test does not resolve: lookup pypi.test: no such host"},
		{"pip TLS", conn("", 3000), pipTLS, "TLS failure: certificate verify failed: unable to get local issuer certificate"},
		{"npm TLS", conn("", 3000), npmTLS, "TLS failure: self-signed certificate in certificate chain (SELF_SIGNED_CERT_IN_CHAIN)"},
		{"read timeout", conn("", 10), "ReadTimeoutError(\"HTTPSConnectionPool(host='pypi.test', port=443): Read timed out.\")", "it did not answer in time"},
		{"answered", conn("", 3000), "ERROR: No matching distribution found for x\n", ""},
		{"another host refused", &sandbox.Egress{Connections: []sandbox.Connection{{Host: "other.test", Port: 443, Reason: "cannot connect: x: connection refused"}}}, "", ""},
	} {
		got := unreachable("index", ix, c.e, c.out)
		want := ""
		if c.want != "" {
			want = "the index " + ix + " could not be reached: " + c.want
		}
		if len(got) < len(want) || got[:len(want)] != want || (want == "" && got != "") {
			t.Errorf("%s: %q, want %q", c.name, got, want)
		}
	}
}
