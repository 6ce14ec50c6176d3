// Package fixtureserver is the loopback HTTP server under the tests'
// package sources (internal/pyindex, internal/npmreg): GET and HEAD only,
// every request counted (a cache hit must ask nothing), and closable more
// than once, after which its port refuses connections (an index gone).
package fixtureserver

import (
	"crypto/tls"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
)

// Server serves a handler on loopback until Close or the test's end.
type Server struct {
	srv      *httptest.Server
	requests atomic.Int64
	once     sync.Once
}

// New serves h over HTTP; h sees only GET and HEAD requests.
func New(t testing.TB, h http.HandlerFunc) *Server { return serve(t, h, nil) }

// NewTLS serves h over HTTPS with cert (see package testca).
func NewTLS(t testing.TB, h http.HandlerFunc, cert tls.Certificate) *Server {
	return serve(t, h, &cert)
}

func serve(t testing.TB, h http.HandlerFunc, cert *tls.Certificate) *Server {
	t.Helper()
	s := &Server{}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		h(w, r)
	}))
	if cert != nil {
		s.srv.TLS = &tls.Config{Certificates: []tls.Certificate{*cert}}
		s.srv.Config.ErrorLog = log.New(io.Discard, "", 0) // clients that refuse the certificate are what tests expect
		s.srv.StartTLS()
	} else {
		s.srv.Start()
	}
	t.Cleanup(s.Close)
	return s
}

// Base is the server's URL without a trailing slash, http://127.0.0.1:PORT
// (https:// for NewTLS).
func (s *Server) Base() string { return s.srv.URL }

// Host is the server's address, 127.0.0.1:PORT.
func (s *Server) Host() string { return s.srv.Listener.Addr().String() }

// Requests counts all requests so far.
func (s *Server) Requests() int { return int(s.requests.Load()) }

// Close stops the server, after which its port refuses connections. It
// may be called more than once.
func (s *Server) Close() {
	s.once.Do(func() {
		s.srv.CloseClientConnections()
		s.srv.Close()
	})
}
