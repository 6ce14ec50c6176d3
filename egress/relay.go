package egress

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/textproto"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/codeagent/codeagent/sandbox"
)

// errMaxBytes ends a connection that reached the execution's byte cap.
var errMaxBytes = errors.New("max_bytes reached")

// handle serves one connection of the program: a CONNECT tunnel, or one
// plain HTTP request in absolute form, forwarded with Connection: close
// (so each request is decided on its own connection).
func (p *Proxy) handle(c net.Conn) {
	defer p.forget(c, true)
	p.mu.Lock()
	busy := p.active > maxActive
	p.mu.Unlock()
	if busy {
		rec := p.newRecord("?", "", 0)
		rec.set(func(r *sandbox.Connection) { r.Reason = "too many connections at once" })
		p.answer(c, 503, "-", fmt.Sprintf("more than %d connections at once", maxActive))
		return
	}
	_ = c.SetReadDeadline(time.Now().Add(headTimeout))
	br := bufio.NewReaderSize(&headLimit{r: c, left: maxHead}, 16<<10)
	h, err := readHead(br)
	if err != nil {
		if errors.Is(err, io.EOF) {
			return // connected and went away: nothing was asked
		}
		rec := p.newRecord("?", "", 0)
		rec.set(func(r *sandbox.Connection) { r.Reason = "not an HTTP proxy request: " + err.Error() })
		p.answer(c, 400, "-", "not an HTTP proxy request: "+err.Error())
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	if h.method == "CONNECT" {
		p.tunnel(c, br, h)
		return
	}
	p.forward(c, br, h)
}

// tunnel serves CONNECT host:port.
func (p *Proxy) tunnel(c net.Conn, br *bufio.Reader, h *head) {
	host, portText, err := net.SplitHostPort(h.target)
	port, perr := strconv.Atoi(portText)
	rec := p.newRecord("CONNECT", host, port)
	if err != nil || perr != nil {
		rec.set(func(r *sandbox.Connection) { r.Host, r.Reason = h.target, "CONNECT needs HOST:PORT" })
		p.answer(c, 400, printable(h.target, 200), "CONNECT needs HOST:PORT")
		return
	}
	up := p.connect(rec, c, host, port)
	if up == nil {
		return
	}
	defer p.forget(up, false)
	if err := p.send(c, rec, &rec.in, []byte("HTTP/1.1 200 Connection established\r\n\r\n")); err != nil {
		return
	}
	if err := p.sendBuffered(up, br, rec, &rec.out); err != nil {
		return
	}
	p.relay(rec, c, up)
}

// forward serves one plain HTTP request, GET http://host/path.
func (p *Proxy) forward(c net.Conn, br *bufio.Reader, h *head) {
	u, err := url.Parse(h.target)
	if err != nil || !u.IsAbs() || u.Host == "" {
		rec := p.newRecord(h.method, "", 0)
		why := "this is codeagent's egress proxy: send requests in absolute form (set HTTP_PROXY), or use CONNECT"
		rec.set(func(r *sandbox.Connection) { r.Reason = why })
		p.answer(c, 400, printable(h.target, 200), why)
		return
	}
	port := 80
	if u.Port() != "" {
		port, _ = strconv.Atoi(u.Port())
	}
	rec := p.newRecord(h.method, u.Hostname(), port)
	if u.Scheme != "http" {
		why := fmt.Sprintf("scheme %q: only http:// is forwarded; https goes through CONNECT", u.Scheme)
		rec.set(func(r *sandbox.Connection) { r.Reason = why })
		p.answer(c, 400, u.Host, why)
		return
	}
	if hh := h.header.Get("Host"); hh != "" && !sameHost(hh, u.Host, port) {
		why := fmt.Sprintf("the Host header %q does not name the URL's host %q", printable(hh, 100), u.Host)
		rec.set(func(r *sandbox.Connection) { r.Reason = why })
		p.answer(c, 403, u.Host, why)
		return
	}
	up := p.connect(rec, c, u.Hostname(), port)
	if up == nil {
		return
	}
	defer p.forget(up, false)
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s %s\r\nHost: %s\r\n", h.method, u.RequestURI(), h.proto, u.Host)
	upgrade := writeHeader(&b, h.header, true)
	if upgrade {
		b.WriteString("Connection: Upgrade\r\n\r\n")
	} else {
		b.WriteString("Connection: close\r\n\r\n")
	}
	if p.send(up, rec, &rec.out, b.Bytes()) != nil || p.sendBuffered(up, br, rec, &rec.out) != nil {
		return
	}
	// The request's body, and anything after it, passes as it is, while
	// the response's head is read.
	upDone := make(chan error, 1)
	go func() { upDone <- p.pipe(up, c, rec, &rec.out) }()
	ubr := bufio.NewReaderSize(&headLimit{r: up, left: maxHead}, 16<<10)
	for {
		rh, err := readHead(ubr)
		if err != nil {
			rec.set(func(r *sandbox.Connection) { r.Reason = "bad response from the host: " + err.Error() })
			p.answer(c, 502, u.Host, "bad response from the host: "+err.Error())
			return
		}
		code, _ := strconv.Atoi(rh.target)
		var out bytes.Buffer
		fmt.Fprintf(&out, "%s %s %s\r\n", rh.method, rh.target, rh.proto)
		if code >= 100 && code < 200 && code != 101 {
			writeHeader(&out, rh.header, false)
			out.WriteString("\r\n")
		} else if writeHeader(&out, rh.header, true) && code == 101 {
			out.WriteString("Connection: Upgrade\r\n\r\n")
		} else {
			out.WriteString("Connection: close\r\n\r\n")
		}
		if p.send(c, rec, &rec.in, out.Bytes()) != nil {
			return
		}
		if code >= 200 || code == 101 {
			break
		}
	}
	if err := p.sendBuffered(c, ubr, rec, &rec.in); err != nil {
		return
	}
	if err := p.pipe(c, up, rec, &rec.in); err != nil {
		p.cut(rec, err)
	}
	_ = c.Close() // the response is whole (Connection: close), or cut
	if err := <-upDone; err != nil && !errors.Is(err, net.ErrClosed) {
		p.cut(rec, err)
	}
}

// relay copies both ways until both sides are done, passing on a
// half-close; a cut or an error ends both.
func (p *Proxy) relay(rec *record, c, up net.Conn) {
	errc := make(chan error, 1)
	go func() {
		err := p.pipe(up, c, rec, &rec.out)
		if err == nil {
			closeWrite(up)
		} else {
			_ = up.Close()
			_ = c.Close()
		}
		errc <- err
	}()
	err := p.pipe(c, up, rec, &rec.in)
	if err == nil {
		closeWrite(c)
	} else {
		_ = up.Close()
		_ = c.Close()
		p.cut(rec, err)
	}
	if err := <-errc; err != nil && !errors.Is(err, net.ErrClosed) {
		p.cut(rec, err)
	}
}

// cut notes why a connection ended early.
func (p *Proxy) cut(rec *record, err error) {
	rec.set(func(r *sandbox.Connection) {
		if r.Reason != "" {
			return
		}
		if errors.Is(err, errMaxBytes) {
			r.Reason = fmt.Sprintf("cut at the execution's max_bytes of %s", sandbox.FormatSize(p.maxBytes))
		} else if !errors.Is(err, net.ErrClosed) {
			r.Reason = "ended: " + err.Error()
		}
	})
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
}

// pipe copies src to dst until EOF (nil) or the byte cap (errMaxBytes),
// in chunks reserved from the execution's budget. Between TCP connections
// each chunk is spliced in the kernel.
func (p *Proxy) pipe(dst, src net.Conn, rec *record, n *atomic.Int64) error {
	for {
		grant := p.budget.take(chunkSize(p.maxBytes))
		if grant == 0 {
			return errMaxBytes
		}
		w, err := io.CopyN(dst, src, grant)
		n.Add(w)
		p.moved.Add(w)
		if w < grant {
			p.budget.give(grant - w)
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// chunkSize is how much one copy may move before asking the budget again.
func chunkSize(limit int64) int64 { return min(max(limit/64, 16<<10), 1<<20) }

// send writes b within the budget.
func (p *Proxy) send(dst net.Conn, rec *record, n *atomic.Int64, b []byte) error {
	if len(b) == 0 {
		return nil
	}
	if grant := p.budget.take(int64(len(b))); grant < int64(len(b)) {
		p.budget.give(grant)
		p.cut(rec, errMaxBytes)
		return errMaxBytes
	}
	w, err := dst.Write(b)
	n.Add(int64(w))
	p.moved.Add(int64(w))
	p.budget.give(int64(len(b) - w))
	return err
}

// sendBuffered passes on what br read beyond a head.
func (p *Proxy) sendBuffered(dst net.Conn, br *bufio.Reader, rec *record, n *atomic.Int64) error {
	b, _ := br.Peek(br.Buffered())
	return p.send(dst, rec, n, b)
}

// head is a request line ("GET url HTTP/1.1": method, target, proto) or
// a status line (proto, code, reason, stored as method, target, proto in
// that order) and its header.
type head struct {
	method, target, proto string
	header                textproto.MIMEHeader
}

// readHead reads a request or status line and its header.
func readHead(br *bufio.Reader) (*head, error) {
	tp := textproto.NewReader(br)
	line, err := tp.ReadLine()
	if err != nil {
		return nil, err
	}
	f := strings.SplitN(line, " ", 3)
	if len(f) < 2 {
		return nil, fmt.Errorf("malformed first line %q", printable(line, 100))
	}
	if len(f) == 2 {
		f = append(f, "")
	}
	h := &head{method: f[0], target: f[1], proto: f[2]}
	if strings.HasPrefix(f[0], "HTTP/1.") { // a status line
		if len(f[1]) != 3 {
			return nil, fmt.Errorf("malformed status line %q", printable(line, 100))
		}
	} else if h.proto != "HTTP/1.1" && h.proto != "HTTP/1.0" {
		return nil, fmt.Errorf("protocol %q: HTTP/1.x only", printable(h.proto, 20))
	}
	if h.header, err = tp.ReadMIMEHeader(); err != nil {
		return nil, err
	}
	return h, nil
}

// writeHeader writes hdr without the hop-by-hop fields (and Host);
// upgrade reports a Connection: upgrade, whose Upgrade field is kept.
func writeHeader(b *bytes.Buffer, hdr textproto.MIMEHeader, dropHop bool) (upgrade bool) {
	drop := map[string]bool{"Host": true}
	if dropHop {
		for _, k := range []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authorization", "Proxy-Authenticate"} {
			drop[k] = true
		}
		for _, v := range hdr["Connection"] {
			for _, tok := range strings.Split(v, ",") {
				k := textproto.CanonicalMIMEHeaderKey(strings.TrimSpace(tok))
				if strings.EqualFold(k, "upgrade") {
					upgrade = true
					continue
				}
				if k != "Content-Length" && k != "Transfer-Encoding" {
					drop[k] = true
				}
			}
		}
	}
	keys := make([]string, 0, len(hdr))
	for k := range hdr {
		if !drop[k] {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		for _, v := range hdr[k] {
			fmt.Fprintf(b, "%s: %s\r\n", k, v)
		}
	}
	return upgrade
}

// sameHost compares a Host header with the URL's host, default port
// included.
func sameHost(header, urlHost string, port int) bool {
	norm := func(h string) string {
		h = strings.ToLower(strings.TrimSuffix(h, "."))
		if _, _, err := net.SplitHostPort(h); err != nil {
			h = net.JoinHostPort(strings.Trim(h, "[]"), strconv.Itoa(port))
		}
		return h
	}
	return norm(header) == norm(urlHost)
}

// headLimit bounds what the head of a message may take.
type headLimit struct {
	r    io.Reader
	left int
}

func (l *headLimit) Read(b []byte) (int, error) {
	if l.left <= 0 {
		return 0, errors.New("header too large")
	}
	if len(b) > l.left {
		b = b[:l.left]
	}
	n, err := l.r.Read(b)
	l.left -= n
	return n, err
}
