package sandbox

import (
	"fmt"
	"net"
	"time"
)

// Network lets a program reach chosen hosts. The sandbox still has no
// route out: the program's only way to the network is an HTTP proxy run
// by codeagent outside the sandbox (package egress), which decides every
// connection by host name and port. A nil Network, the default, is no
// network at all.
type Network struct {
	// Allow lists the hosts a program may reach: "api.example.com" (ports
	// 80 and 443), "*.github.com:443", "files.example.org:80", or an IP
	// literal ("10.0.0.5:8080"), the only way to reach an address by
	// number or a name that resolves to a private one. See egress.ParseRule.
	Allow []string
	// MaxBytes caps the bytes in and out of all the execution's
	// connections together; 0 means DefaultEgressBytes.
	MaxBytes int64
	// Resolve maps names to "ADDR:PORT" in place of DNS, like curl's
	// --resolve: for tests, which serve on loopback. Its addresses count as
	// listed explicitly. Front ends accept it only behind an explicit flag
	// and record it with the result.
	Resolve map[string]string
	// CACerts are PEM certificates of authorities the program trusts for
	// this execution besides its sandbox's own (see TrustStore): a
	// private index's or API's. The egress layer places both together
	// at CABundlePath and points the usual variables at it (see
	// egress.Wrap); the proxy itself never looks inside TLS.
	CACerts []byte
}

// DefaultEgressBytes is the per-execution cap of Network.MaxBytes.
const DefaultEgressBytes = 100 << 20

// Gateway is how a backend hands the network to a program: it opens a TCP
// listener on 127.0.0.1:Port() of the sandbox's own loopback (inside the
// sandbox's network namespace; the host's loopback stays out of reach) and
// passes it to Serve, in a goroutine, before the program starts. Once every
// process of the sandbox is gone the backend closes the listener. The
// egress package sets it; a Spec with a Network and no Gateway is invalid.
type Gateway interface {
	Port() int
	Serve(l net.Listener)
}

// Connection is one attempt of a program to reach the network.
type Connection struct {
	Time   time.Time
	Method string // CONNECT, or the HTTP method of a plain HTTP request
	Host   string // as the program asked, lower case
	Port   int
	// Allowed says that the policy let it through; Rule is the allow-list
	// entry that did.
	Allowed bool
	Rule    string
	Reason  string // why it was refused, failed or cut; "" when it ran its course
	Addr    string // the address dialled, "ADDR:PORT"
	// BytesOut went from the program to the host, BytesIn back.
	BytesOut, BytesIn int64
}

// Egress is what became of an execution's network: the policy it ran
// under and every connection attempt.
type Egress struct {
	Allow       []string
	Resolve     map[string]string // overrides in force (tests)
	MaxBytes    int64
	Bytes       int64 // in and out, all connections
	Connections []Connection
	// Dropped counts attempts beyond the ones kept in Connections.
	Dropped int
}

// Refused lists the connection attempts the policy refused.
func (e *Egress) Refused() []Connection {
	if e == nil {
		return nil
	}
	var out []Connection
	for _, c := range e.Connections {
		if !c.Allowed {
			out = append(out, c)
		}
	}
	return out
}

// validateNetwork is Validate's part for the network.
func (s Spec) validateNetwork() error {
	switch {
	case s.Network == nil && s.Gateway != nil:
		return fmt.Errorf("%w: a gateway without a network policy", ErrInvalidSpec)
	case s.Network == nil:
		return nil
	case s.Gateway == nil:
		return fmt.Errorf("%w: network access needs the egress proxy (open the sandbox with backends.Open, or wrap it with egress.Wrap)", ErrInvalidSpec)
	case s.Gateway.Port() <= 0 || s.Gateway.Port() > 65535:
		return fmt.Errorf("%w: gateway port %d", ErrInvalidSpec, s.Gateway.Port())
	case s.Network.MaxBytes < 0:
		return fmt.Errorf("%w: negative network byte limit", ErrInvalidSpec)
	}
	if len(s.Network.CACerts) > 0 {
		if _, err := ParseCerts(s.Network.CACerts); err != nil {
			return fmt.Errorf("%w: the network's certificate authorities: %v", ErrInvalidSpec, err)
		}
	}
	return nil
}

// EgressJSON is the JSON form of Egress, in ResultJSON.
type EgressJSON struct {
	Allow       []string          `json:"allow"`
	Resolve     map[string]string `json:"resolve,omitempty"`
	MaxBytes    int64             `json:"max_bytes"`
	Bytes       int64             `json:"bytes"`
	Connections []ConnectionJSON  `json:"connections"`
	Dropped     int               `json:"dropped,omitempty"`
}

// ConnectionJSON is the JSON form of a Connection.
type ConnectionJSON struct {
	Time     time.Time `json:"time"`
	Method   string    `json:"method"`
	Host     string    `json:"host"`
	Port     int       `json:"port"`
	Allowed  bool      `json:"allowed"`
	Rule     string    `json:"rule,omitempty"`
	Reason   string    `json:"reason,omitempty"`
	Addr     string    `json:"addr,omitempty"`
	BytesOut int64     `json:"bytes_out"`
	BytesIn  int64     `json:"bytes_in"`
}

// JSON returns the JSON form of e; nil for nil.
func (e *Egress) JSON() *EgressJSON {
	if e == nil {
		return nil
	}
	j := &EgressJSON{Allow: e.Allow, Resolve: e.Resolve, MaxBytes: e.MaxBytes, Bytes: e.Bytes,
		Connections: make([]ConnectionJSON, 0, len(e.Connections)), Dropped: e.Dropped}
	if j.Allow == nil {
		j.Allow = []string{}
	}
	for _, c := range e.Connections {
		j.Connections = append(j.Connections, ConnectionJSON{Time: c.Time, Method: c.Method, Host: c.Host, Port: c.Port,
			Allowed: c.Allowed, Rule: c.Rule, Reason: c.Reason, Addr: c.Addr, BytesOut: c.BytesOut, BytesIn: c.BytesIn})
	}
	return j
}

// RefusedHosts lists "HOST:PORT (reason)" for every refused attempt, for
// messages to people and models.
func (j *EgressJSON) RefusedHosts() []string {
	if j == nil {
		return nil
	}
	var out []string
	for _, c := range j.Connections {
		if !c.Allowed {
			out = append(out, fmt.Sprintf("%s (%s)", net.JoinHostPort(c.Host, fmt.Sprint(c.Port)), c.Reason))
		}
	}
	return out
}
