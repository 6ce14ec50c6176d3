package mcpserver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Handler serves the server over streamable HTTP, one MCP session (and
// workspace) per Mcp-Session-Id; an idle session is closed after
// Config.SessionTimeout. Mount it behind the HTTP server's authentication:
// a session is bound to the bearer token that opened it, and a request of
// another token for it is refused (403). On a loopback connection it
// refuses a Host that is not a loopback address (DNS rebinding).
func (s *Server) Handler() http.Handler { return s.handler(nil, false) }

// HandlerWithOwner is Handler with owner naming a request's API key in
// the audit log (and binding sessions to it); without it a hash of the
// bearer token does. It is for an HTTP server that checks Host and Origin
// itself, as codeagent serve does for every route: it leaves out
// Handler's own Host check, which knows no configured public name.
func (s *Server) HandlerWithOwner(owner func(*http.Request) string) http.Handler {
	return s.handler(owner, true)
}

func (s *Server) handler(owner func(*http.Request) string, hostChecked bool) http.Handler {
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.mcp },
		&mcp.StreamableHTTPOptions{Logger: s.log, SessionTimeout: s.cfg.SessionTimeout, MaxRequestBodyBytes: s.cfg.MaxRequestBody,
			DisableLocalhostProtection: hostChecked})
	verify := func(_ context.Context, token string, r *http.Request) (*auth.TokenInfo, error) {
		id := ""
		if owner != nil {
			id = owner(r)
		}
		if id == "" || !labelPart.MatchString(id) {
			sum := sha256.Sum256([]byte(token))
			id = "key" + hex.EncodeToString(sum[:6])
		}
		return &auth.TokenInfo{UserID: id, Expiration: time.Now().Add(24 * time.Hour)}, nil
	}
	bound := auth.RequireBearerToken(verify, nil)(h)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "" {
			h.ServeHTTP(w, r) // no keys configured: the anonymous owner on loopback
			return
		}
		bound.ServeHTTP(w, r)
	})
}
