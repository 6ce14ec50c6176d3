package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/codeagent/codeagent/sandbox"
)

// ProxyPort is where a program finds the proxy: 127.0.0.1:3128 of the
// sandbox's own loopback.
const ProxyPort = 3128

// Bounds of one execution's proxy.
const (
	maxActive    = 256  // connections at once; more get 503
	maxRecords   = 1000 // attempts kept in the result; more are counted
	headTimeout  = 30 * time.Second
	maxHead      = 64 << 10
	dialTimeout  = 10 * time.Second
	lookupTimout = 5 * time.Second
)

// Config is the policy of one execution's proxy.
type Config struct {
	sandbox.Network
	// Lookup resolves a name; nil is the host's resolver. Tests use it to
	// play a DNS server that answers with loopback.
	Lookup func(ctx context.Context, host string) ([]netip.Addr, error)
	// Port is where programs connect; 0 is ProxyPort.
	Port int
}

// Proxy serves the connections of one execution: a sandbox.Gateway.
type Proxy struct {
	policy   *Policy
	resolve  map[string]netip.AddrPort
	lookup   func(ctx context.Context, host string) ([]netip.Addr, error)
	port     int
	net      sandbox.Network
	maxBytes int64
	budget   budget
	moved    atomic.Int64 // bytes in and out, all connections
	ctx      context.Context
	cancel   context.CancelFunc

	mu        sync.Mutex
	closed    bool
	listeners []net.Listener
	conns     map[net.Conn]struct{}
	records   []*record
	dropped   int
	active    int
	wg        sync.WaitGroup
}

var _ sandbox.Gateway = (*Proxy)(nil)

// record is one connection attempt as it goes.
type record struct {
	mu      sync.Mutex
	c       sandbox.Connection
	out, in atomic.Int64
}

func (r *record) set(f func(c *sandbox.Connection)) {
	r.mu.Lock()
	f(&r.c)
	r.mu.Unlock()
}

// New checks the policy and returns a proxy ready to Serve.
func New(cfg Config) (*Proxy, error) {
	pol, err := NewPolicy(cfg.Allow)
	if err != nil {
		return nil, err
	}
	res, err := resolveTable(cfg.Resolve)
	if err != nil {
		return nil, err
	}
	p := &Proxy{policy: pol, resolve: res, lookup: cfg.Lookup, port: cfg.Port, net: cfg.Network, conns: map[net.Conn]struct{}{}}
	if p.port == 0 {
		p.port = ProxyPort
	}
	if p.lookup == nil {
		p.lookup = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}
	}
	p.maxBytes = cfg.MaxBytes
	if p.maxBytes <= 0 {
		p.maxBytes = sandbox.DefaultEgressBytes
	}
	p.budget.left = p.maxBytes
	p.ctx, p.cancel = context.WithCancel(context.Background())
	return p, nil
}

// Port implements sandbox.Gateway.
func (p *Proxy) Port() int { return p.port }

// Serve implements sandbox.Gateway: it accepts until l is closed (by
// Close). The proxy owns l.
func (p *Proxy) Serve(l net.Listener) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		_ = l.Close()
		return
	}
	p.listeners = append(p.listeners, l)
	p.mu.Unlock()
	for {
		c, err := l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) || p.ctx.Err() != nil {
				return
			}
			time.Sleep(10 * time.Millisecond) // EMFILE and the like
			continue
		}
		if !p.track(c, true) {
			_ = c.Close()
			return
		}
		go p.handle(c)
	}
}

// track registers a connection to close at Close; client connections also
// count against maxActive and are waited for.
func (p *Proxy) track(c net.Conn, client bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	if client {
		p.active++
		p.wg.Add(1)
	}
	return true
}

func (p *Proxy) forget(c net.Conn, client bool) {
	p.mu.Lock()
	delete(p.conns, c)
	if client {
		p.active--
	}
	p.mu.Unlock()
	_ = c.Close()
	if client {
		p.wg.Done()
	}
}

// Close stops the proxy: the listeners, every connection, and waits (a
// little) for the handlers to finish their records.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	for _, l := range p.listeners {
		_ = l.Close()
	}
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.cancel()
	done := make(chan struct{})
	go func() { p.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
	}
}

// Report is what the execution did with the network.
func (p *Proxy) Report() *sandbox.Egress {
	p.mu.Lock()
	defer p.mu.Unlock()
	e := &sandbox.Egress{Allow: p.policy.Rules(), MaxBytes: p.maxBytes, Bytes: p.moved.Load(), Dropped: p.dropped}
	if len(p.net.Resolve) > 0 {
		e.Resolve = map[string]string{}
		for k, v := range p.net.Resolve {
			e.Resolve[k] = v
		}
	}
	for _, r := range p.records {
		r.mu.Lock()
		c := r.c
		r.mu.Unlock()
		c.BytesOut, c.BytesIn = r.out.Load(), r.in.Load()
		e.Connections = append(e.Connections, c)
	}
	sort.SliceStable(e.Connections, func(i, j int) bool { return e.Connections[i].Time.Before(e.Connections[j].Time) })
	return e
}

// newRecord starts the record of an attempt.
func (p *Proxy) newRecord(method, host string, port int) *record {
	r := &record{c: sandbox.Connection{Time: time.Now().UTC(), Method: method, Host: host, Port: port}}
	p.mu.Lock()
	if len(p.records) < maxRecords {
		p.records = append(p.records, r)
	} else {
		p.dropped++
	}
	p.mu.Unlock()
	return r
}

// refusal is a connection the proxy will not make, and how it answers.
type refusal struct {
	status int // 403 for the policy, 502 when the host cannot be reached
	why    string
}

// admit decides host:port and, when allowed, returns the addresses to
// dial. Every refusal is the policy's: a name not listed, a port not
// listed, an IP literal, an address that is not public.
func (p *Proxy) admit(rec *record, rawHost string, port int) ([]netip.AddrPort, *refusal) {
	host, ip, err := normalizeHost(rawHost)
	rec.set(func(c *sandbox.Connection) { c.Host = host })
	if err != nil {
		return nil, &refusal{403, err.Error()}
	}
	if port < 1 || port > 65535 {
		return nil, &refusal{403, fmt.Sprintf("port %d is not a port", port)}
	}
	if p.budget.spent() {
		return nil, &refusal{403, fmt.Sprintf("the execution's network budget (max_bytes %s) is spent", sandbox.FormatSize(p.maxBytes))}
	}
	rule, why := p.policy.decide(host, ip, port)
	if why != "" {
		return nil, &refusal{403, why}
	}
	rec.set(func(c *sandbox.Connection) { c.Rule = rule.text })
	if ip.IsValid() { // listed explicitly, by decide
		return []netip.AddrPort{netip.AddrPortFrom(ip, uint16(port))}, nil
	}
	if ap, ok := p.resolve[host]; ok { // listed explicitly, by the override
		return []netip.AddrPort{ap}, nil
	}
	ctx, cancel := context.WithTimeout(p.ctx, lookupTimout)
	defer cancel()
	addrs, err := p.lookup(ctx, host)
	if err != nil || len(addrs) == 0 {
		if err == nil {
			err = errors.New("no addresses")
		}
		return nil, &refusal{502, fmt.Sprintf("%s does not resolve: %v", host, err)}
	}
	out, why := p.policy.resolved(host, addrs, port)
	if why != "" {
		return nil, &refusal{403, why}
	}
	return out, nil
}

// dial connects to the first address that answers.
func (p *Proxy) dial(addrs []netip.AddrPort) (net.Conn, netip.AddrPort, error) {
	ctx, cancel := context.WithTimeout(p.ctx, dialTimeout)
	defer cancel()
	var d net.Dialer
	var err error
	for i, a := range addrs {
		if i == 4 {
			break
		}
		var c net.Conn
		if c, err = d.DialContext(ctx, "tcp", a.String()); err == nil {
			return c, a, nil
		}
	}
	return nil, netip.AddrPort{}, err
}

// connect admits and dials for rec; on a refusal it answers the client.
func (p *Proxy) connect(rec *record, client net.Conn, host string, port int) net.Conn {
	addrs, ref := p.admit(rec, host, port)
	if ref == nil {
		up, addr, err := p.dial(addrs)
		if err == nil && p.track(up, false) {
			rec.set(func(c *sandbox.Connection) { c.Allowed, c.Addr = true, addr.String() })
			return up
		}
		if up != nil {
			_ = up.Close()
		}
		if err == nil {
			err = errors.New("the execution ended")
		}
		rec.set(func(c *sandbox.Connection) { c.Allowed = true })
		ref = &refusal{502, fmt.Sprintf("cannot connect: %v", err)}
	}
	rec.set(func(c *sandbox.Connection) { c.Reason = ref.why })
	p.answer(client, ref.status, net.JoinHostPort(rec.c.Host, fmt.Sprint(port)), ref.why)
	return nil
}

// answer sends the program an error response naming the host and the
// rule: in the status line (what most clients show for a refused CONNECT)
// and in the body.
func (p *Proxy) answer(c net.Conn, status int, hostport, why string) {
	text := map[int]string{400: "Bad Request", 403: "Forbidden", 502: "Bad Gateway", 503: "Service Unavailable"}[status]
	phrase := printable(fmt.Sprintf("%s (codeagent egress: %s %s)", text, hostport, why), 300)
	body := fmt.Sprintf("codeagent egress proxy: %s: %s\n", printable(hostport, 300), printable(why, 1000))
	if status == 403 {
		body += "allowed: " + strings.Join(p.policy.Rules(), ", ") + "\n"
	}
	_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	_, _ = fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nX-Codeagent-Egress: %s\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s",
		status, phrase, map[bool]string{true: "refused", false: "failed"}[status == 403], len(body), body)
}

// printable keeps printable ASCII, at most n bytes: a status line carries
// no control characters.
func printable(s string, n int) string {
	b := make([]byte, 0, min(len(s), n))
	for i := 0; i < len(s) && len(b) < n; i++ {
		if c := s[i]; c >= 0x20 && c < 0x7f {
			b = append(b, c)
		} else {
			b = append(b, '?')
		}
	}
	return string(b)
}

// budget is the bytes an execution may still move, in and out together.
// Once a copy found it empty, it stays spent.
type budget struct {
	mu    sync.Mutex
	left  int64
	empty bool
}

// take reserves up to want bytes, fewer near the end, none once spent.
func (b *budget) take(want int64) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.empty {
		return 0
	}
	n := min(want, b.left)
	b.left -= n
	b.empty = n == 0
	return n
}

func (b *budget) give(n int64) {
	b.mu.Lock()
	b.left += n
	b.mu.Unlock()
}

func (b *budget) spent() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.empty || b.left <= 0
}
