package deps

import (
	"strconv"
	"strings"

	"github.com/codeagent/codeagent/internal/lazyre"
	"github.com/codeagent/codeagent/sandbox"
)

// Why an install failed, told apart: an index or registry that could not
// be reached says so, with the reason, rather than pip's "from versions:
// none" or npm's retries. What the proxy saw of the install's connections
// (sandbox.Egress, codeagent's own record) decides for connections that
// never opened; TLS, which the proxy only tunnels, is read from the
// installer's own error.

// unreachable returns why the index or registry at rawURL could not be
// reached, or "" when it was (or the install never tried). e is the
// install's egress record, out the installer's output.
func unreachable(what, rawURL string, e *sandbox.Egress, out string) string {
	host, port, err := urlHost(rawURL, what)
	if err != nil {
		return ""
	}
	msg := func(why string) string { return "the " + what + " " + rawURL + " could not be reached: " + why }
	reached, refused := false, ""
	if e != nil {
		for _, c := range e.Connections {
			if !strings.EqualFold(c.Host, host) || strconv.Itoa(c.Port) != port {
				continue
			}
			if c.BytesIn > 0 {
				reached = true
			} else if c.Reason != "" && refused == "" {
				refused = c.Reason
			}
		}
	}
	if !reached && refused != "" {
		return msg(proxyReason(refused))
	}
	if why := tlsFailure(out); why != "" {
		return msg("TLS failure: " + why + " (an index or registry with a private certificate authority needs it: --ca-cert, or network.ca_certs in a manifest)")
	}
	if timedOut.MatchString(out) {
		return msg("it did not answer in time")
	}
	return ""
}

// proxyReason is the proxy's reason for a connection that did not open,
// shortened: "connection refused" from "cannot connect: dial tcp
// 127.0.0.1:1: connect: connection refused".
func proxyReason(r string) string {
	if rest, ok := strings.CutPrefix(r, "cannot connect: "); ok {
		if i := strings.LastIndex(rest, ": "); i >= 0 {
			rest = rest[i+2:]
		}
		if rest == "i/o timeout" {
			return "the connection timed out"
		}
		return rest
	}
	return r
}

var (
	// pip: [SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed:
	// unable to get local issuer certificate (_ssl.c:992)
	pipSSL = lazyre.New(`\[SSL(?:: [A-Z_]+)?\] ([^('"]+?)\s*\(_ssl\.c`)
	// pip, for TLS errors without OpenSSL's code.
	pipSSLOther = lazyre.New(`SSLError\((?:[A-Za-z]+\()?(?:\d+, )?'([^']+)'`)
	// npm: npm error code UNABLE_TO_VERIFY_LEAF_SIGNATURE, then
	// npm error request to URL failed, reason: unable to verify ...
	npmTLSCode = lazyre.New(`npm (?:error|ERR!) code (UNABLE_TO_[A-Z_]+|SELF_SIGNED_CERT_IN_CHAIN|DEPTH_ZERO_SELF_SIGNED_CERT|CERT_[A-Z_]+|ERR_TLS_[A-Z_]+|ERR_SSL_[A-Z_]+|EPROTO)\b`)
	npmReason  = lazyre.New(`failed, reason: ([^\n]+)`)
	timedOut   = lazyre.New(`ReadTimeoutError|Read timed out|ConnectTimeoutError|npm (?:error|ERR!) code (?:ETIMEDOUT|ESOCKETTIMEDOUT)`)
)

// tlsFailure is the reason of a TLS handshake that failed in pip's or
// npm's output, or "".
func tlsFailure(out string) string {
	if m := pipSSL.FindStringSubmatch(out); m != nil {
		return strings.TrimSpace(m[1])
	}
	if m := pipSSLOther.FindStringSubmatch(out); m != nil {
		return strings.TrimSpace(m[1])
	}
	if m := npmTLSCode.FindStringSubmatch(out); m != nil {
		if r := npmReason.FindStringSubmatch(out); r != nil {
			return strings.TrimSpace(r[1]) + " (" + m[1] + ")"
		}
		return m[1]
	}
	return ""
}

// pipVersions matches pip's line for a requirement no version of which
// fits, with the versions the index has.
var pipVersions = lazyre.New(`Could not find a version that satisfies the requirement (\S+) \(from versions: ([^)]*)\)`)

// pipNoMatch tells "no such package" from "no matching version" in pip's
// error, or returns "".
func pipNoMatch(out string) string {
	m := pipVersions.FindStringSubmatch(out)
	if m == nil {
		return ""
	}
	if strings.TrimSpace(m[2]) == "none" {
		return "no such package on the index, or no wheel of it for this platform: " + m[1]
	}
	return "no matching version of " + m[1] + ": the index has " + tail(m[2], 300)
}
