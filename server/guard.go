package server

import (
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// The guard decides, before authentication, whether a request may reach a
// route at all. Everything it admits is on an allow list:
//
//   - Host must name this server: the address the connection arrived at
//     (an IP literal with its port), on loopback also localhost and the
//     other loopback addresses with that port, or one of
//     Config.AllowedHosts. Anything else is a DNS-rebinding page (or a
//     misdirected request) and is answered 421.
//   - On the API (/v1, /metrics, /mcp), a browser request must come from
//     the server's own page: Sec-Fetch-Site, when sent, is same-origin or
//     none (typed by the user), and Origin, when sent, is http(s) with an
//     allowed host and port. Otherwise 403. curl and other programs send
//     neither header.
//   - A body is accepted only in the form its route declares: JSON only as
//     application/json, multipart only on the upload route, none where the
//     route takes none. Otherwise 415. So a cross-site <form>, which can
//     send only text/plain, urlencoded or multipart bodies, can reach
//     nothing even from a browser that sends no Origin.
//
// The page and its assets are exempt from the Origin rule only: any site
// may link to the page, and its files are public.

// bodyKind is what a route accepts as its request body.
type bodyKind int

const (
	bodyNone      bodyKind = iota // no body (a Content-Type of JSON is tolerated)
	bodyJSON                      // application/json, or nothing
	bodyMultipart                 // multipart/form-data
	bodyRaw                       // any bytes: the uploaded file itself (PUT, never sent by a form)
)

// route is what wrap needs to know of a route.
type route struct {
	kind routeKind
	auth bool     // an API key is required (when keys are configured)
	body bodyKind // the request body it accepts
	page bool     // the page or one of its assets: no Origin rule
}

var (
	errCrossSite = &apiError{Status: http.StatusForbidden, Code: "cross_origin",
		Message: "cross-site requests are refused: only this server's own page (same origin) or a program without an Origin header may call the API"}
	errNoHost = &apiError{Status: http.StatusMisdirectedRequest, Code: "host_not_allowed", Message: "a Host header is required"}
)

func hostNotAllowed(host string) error {
	return &apiError{Status: http.StatusMisdirectedRequest, Code: "host_not_allowed",
		Message: fmt.Sprintf("Host %q does not name this server (this refuses DNS rebinding): use its address, "+
			"or allow the name (serve --allowed-hosts NAME)", host)}
}

func unsupportedMedia(format string, a ...any) error {
	return &apiError{Status: http.StatusUnsupportedMediaType, Code: "unsupported_media_type", Message: fmt.Sprintf(format, a...)}
}

// splitHost splits a Host header or an origin's host into a lower-case
// host name (IP literals without brackets) and a port, defPort when none
// is given. ok is false for anything malformed.
func splitHost(hostport, defPort string) (host, port string, ok bool) {
	if hostport == "" {
		return "", "", false
	}
	h, p, err := net.SplitHostPort(hostport)
	if err != nil {
		if strings.HasPrefix(hostport, "[") && strings.HasSuffix(hostport, "]") {
			h, p = hostport[1:len(hostport)-1], ""
		} else if !strings.Contains(hostport, ":") {
			h, p = hostport, ""
		} else {
			return "", "", false
		}
	}
	if p == "" {
		p = defPort
	}
	if h == "" || strings.ContainsAny(h, "/@ \t") {
		return "", "", false
	}
	if _, err := strconv.ParseUint(p, 10, 16); p != "" && err != nil {
		return "", "", false
	}
	return strings.ToLower(h), p, true
}

// validAllowedHost checks an entry of Config.AllowedHosts: a host name or
// IP literal, with or without a port; no scheme, path or wildcard.
func validAllowedHost(s string) error {
	h, _, ok := splitHost(s, "80")
	if !ok || strings.ContainsAny(s, "*?/#") || strings.HasSuffix(h, ".") || strings.HasPrefix(h, ".") {
		return fmt.Errorf("allowed host %q: want a host name or address, optionally with :port (no scheme, path or wildcard)", s)
	}
	return nil
}

// hostAllowed reports whether host:port names this server for a request
// that arrived at local: one of the allowed names (any port when the name
// has none), the local address itself, or on loopback any loopback
// address or localhost, with the local port.
func (s *Server) hostAllowed(host, port string, local net.Addr) bool {
	for _, a := range s.cfg.AllowedHosts {
		ah, ap, ok := splitHost(a, "")
		if ok && ah == host && (ap == "" || ap == port) {
			return true
		}
	}
	la, ok := local.(*net.TCPAddr)
	if !ok || port != strconv.Itoa(la.Port) {
		return false
	}
	ip := net.ParseIP(host)
	if ip != nil && ip.Equal(la.IP) {
		return true
	}
	return la.IP.IsLoopback() && (host == "localhost" || (ip != nil && ip.IsLoopback()))
}

func localAddr(r *http.Request) net.Addr {
	a, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	return a
}

// guard applies the rules above to r for rt; nil admits it.
func (s *Server) guard(r *http.Request, rt route) error {
	local := localAddr(r)
	host, port, ok := splitHost(r.Host, "80")
	if !ok {
		return errNoHost
	}
	if !s.hostAllowed(host, port, local) {
		return hostNotAllowed(r.Host)
	}
	if !rt.page {
		if err := s.sameOrigin(r, local); err != nil {
			return err
		}
	}
	return checkBody(r, rt.body)
}

// sameOrigin admits requests without browser provenance headers and those
// a browser marks as coming from this server's own origin.
func (s *Server) sameOrigin(r *http.Request, local net.Addr) error {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin", "none":
	default:
		return errCrossSite
	}
	o := r.Header.Get("Origin")
	if o == "" {
		return nil
	}
	u, err := url.Parse(o)
	if err != nil || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
		return errCrossSite
	}
	def := map[string]string{"http": "80", "https": "443"}[u.Scheme]
	if def == "" {
		return errCrossSite // "null" (sandboxed frames, files), extensions, anything else
	}
	host, port, ok := splitHost(u.Host, def)
	if !ok || !s.hostAllowed(host, port, local) {
		return errCrossSite
	}
	return nil
}

// checkBody admits a body only in the form the route declares.
func checkBody(r *http.Request, kind bodyKind) error {
	ct := r.Header.Get("Content-Type")
	mt := ""
	if ct != "" {
		var err error
		if mt, _, err = mime.ParseMediaType(ct); err != nil {
			return unsupportedMedia("invalid Content-Type %q", ct)
		}
	}
	hasBody := r.ContentLength != 0
	switch kind {
	case bodyRaw:
		return nil
	case bodyJSON:
		if mt == "application/json" || (mt == "" && !hasBody) {
			return nil
		}
		return unsupportedMedia("this route takes a JSON body with Content-Type: application/json (curl --json), not %q", ct)
	case bodyMultipart:
		if mt == "multipart/form-data" {
			return nil
		}
		return unsupportedMedia("this route takes a multipart/form-data body (curl -F file=@NAME), not %q", ct)
	}
	if hasBody || (mt != "" && mt != "application/json") {
		return unsupportedMedia("this route takes no request body")
	}
	return nil
}
