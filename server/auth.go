package server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/codeagent/codeagent/internal/lazyre"
)

// Key is one API key: a name (the owner of its sessions, and what logs
// show) and the bearer token.
type Key struct {
	Name  string `json:"name"`
	Token string `json:"token"`
}

// Keys are the configured API keys.
type Keys []Key

// Anonymous is the owner of every request when no keys are configured.
const Anonymous = "anonymous"

// minTokenLen refuses guessable tokens.
const minTokenLen = 16

var keyName = lazyre.New(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// ParseKeys reads keys from a file's contents: a JSON object {"name":
// "token"}, a JSON array [{"name", "token"}], or one name:token per line
// (blank lines and lines starting with # are skipped).
func ParseKeys(data []byte) (Keys, error) {
	text := strings.TrimSpace(string(data))
	var keys Keys
	switch {
	case strings.HasPrefix(text, "{"):
		var m map[string]string
		if err := json.Unmarshal([]byte(text), &m); err != nil {
			return nil, fmt.Errorf("keys: %w", err)
		}
		for n, t := range m {
			keys = append(keys, Key{Name: n, Token: t})
		}
	case strings.HasPrefix(text, "["):
		if err := json.Unmarshal([]byte(text), &keys); err != nil {
			return nil, fmt.Errorf("keys: %w", err)
		}
	default:
		for i, line := range strings.Split(text, "\n") {
			line = strings.TrimSpace(line)
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			n, t, ok := strings.Cut(line, ":")
			if !ok {
				return nil, fmt.Errorf("keys: line %d: want name:token", i+1)
			}
			keys = append(keys, Key{Name: strings.TrimSpace(n), Token: strings.TrimSpace(t)})
		}
	}
	return keys, keys.Validate()
}

// ParseKeysEnv reads comma-separated name:token pairs, the form of
// CODEAGENT_API_KEYS.
func ParseKeysEnv(s string) (Keys, error) {
	return ParseKeys([]byte(strings.ReplaceAll(s, ",", "\n")))
}

// Validate checks names and tokens; errors never show a token.
func (ks Keys) Validate() error {
	names, tokens := map[string]bool{}, map[string]bool{}
	for _, k := range ks {
		if !keyName.MatchString(k.Name) || k.Name == Anonymous {
			return fmt.Errorf("keys: invalid key name %q: letters, digits, '.', '_', '-', at most 64, not %q", k.Name, Anonymous)
		}
		if len(k.Token) < minTokenLen || strings.ContainsAny(k.Token, " \t\r\n,") {
			return fmt.Errorf("keys: the token of %q must be at least %d characters without spaces or commas", k.Name, minTokenLen)
		}
		if names[k.Name] || tokens[k.Token] {
			return fmt.Errorf("keys: key %q is given twice (name or token)", k.Name)
		}
		names[k.Name], tokens[k.Token] = true, true
	}
	return nil
}

// authenticator maps bearer tokens to owners and keeps each owner's rate
// limiter.
type authenticator struct {
	names  []string
	hashes [][sha256.Size]byte
	rps    rate.Limit
	burst  int

	mu       sync.Mutex
	limiters map[string]*rate.Limiter
}

func newAuthenticator(keys Keys, rps float64, burst int) *authenticator {
	a := &authenticator{rps: rate.Limit(rps), burst: burst, limiters: map[string]*rate.Limiter{}}
	for _, k := range keys {
		a.names = append(a.names, k.Name)
		a.hashes = append(a.hashes, sha256.Sum256([]byte(k.Token)))
	}
	return a
}

var errUnauthorized = &apiError{Status: http.StatusUnauthorized, Code: "unauthorized",
	Message: "a valid API key is required: Authorization: Bearer TOKEN"}

// errNeedToken is errUnauthorized on a server with a local token.
var errNeedToken = &apiError{Status: http.StatusUnauthorized, Code: "unauthorized",
	Message: "this server's token is required: Authorization: Bearer TOKEN, the token `codeagent serve` printed " +
		"at start and keeps in serve-token of its data directory; on the page, open the address it printed"}

// enabled reports whether requests need a token.
func (a *authenticator) enabled() bool { return len(a.names) > 0 }

// owner returns the key name of r's token: its Authorization header or,
// when cookie names a cookie and r has no Authorization header, that
// cookie's value.
func (a *authenticator) owner(r *http.Request, cookie string) (string, error) {
	if !a.enabled() {
		return Anonymous, nil
	}
	var token string
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, t, ok := strings.Cut(h, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			return "", errUnauthorized
		}
		token = strings.TrimSpace(t)
	} else if cookie != "" {
		if c, err := r.Cookie(cookie); err == nil {
			token = c.Value
		}
	}
	return a.lookup(token)
}

// lookup returns the key name of token. Every configured key is compared,
// in constant time, so that timing tells nothing.
func (a *authenticator) lookup(token string) (string, error) {
	if token == "" {
		return "", errUnauthorized
	}
	sum := sha256.Sum256([]byte(token))
	found := -1
	for i := range a.hashes {
		if subtle.ConstantTimeCompare(sum[:], a.hashes[i][:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return "", errUnauthorized
	}
	return a.names[found], nil
}

// allow spends one request of owner's budget, or says how long to wait.
func (a *authenticator) allow(owner string) error {
	a.mu.Lock()
	l, ok := a.limiters[owner]
	if !ok {
		l = rate.NewLimiter(a.rps, a.burst)
		a.limiters[owner] = l
	}
	a.mu.Unlock()
	r := l.Reserve()
	if d := r.Delay(); d > 0 {
		r.Cancel()
		return &apiError{Status: http.StatusTooManyRequests, Code: "rate_limited",
			Message: "too many requests for this key", RetryAfter: max(d, time.Second)}
	}
	return nil
}

// The local token (Config.LocalToken) is what `codeagent serve` requires
// when no API keys are configured, as Jupyter does: programs send it as a
// bearer token, and the page gets it as a cookie by opening the address
// printed at start, /?token=TOKEN, which sets the cookie and redirects to
// / so that the token leaves the address bar.
//
// A cookie is sent by the browser whatever page makes the request, so it
// invites cross-site request forgery. Three things refuse that:
//   - the cookie is SameSite=Strict: no other site's page, link or form
//     makes the browser send it;
//   - cookies do not separate ports, so a page served from another port of
//     the same host (another user's server on 127.0.0.1) is "same site"
//     and its requests do carry the cookie: the guard refuses them on
//     every API route, since their Origin names another port and their
//     Sec-Fetch-Site is same-site, not same-origin;
//   - bodies are JSON only as application/json (or multipart for uploads),
//     which a cross-origin page cannot send without a CORS preflight,
//     which the guard refuses as well.
// The cookie is HttpOnly (no script reads it), host-only, and named after
// the server's port so that two servers on one host keep theirs apart; it
// lasts until the browser closes, and a restart of serve makes a new
// token anyway. Only the local token is ever traded for a cookie: with API
// keys the page sends its key in the Authorization header as before.

var errBadToken = &apiError{Status: http.StatusUnauthorized, Code: "unauthorized",
	Message: "this is not the server's token: open the address `codeagent serve` printed when it started (tokens change at each start)"}

// localToken is the syntax of Config.LocalToken: safe in a URL, a cookie
// and a shell word.
var localToken = lazyre.New(`^[A-Za-z0-9_-]{32,256}$`)

// TokenURL is the address of the page that logs a browser in with the
// local token: base (http://host:port) with /?token=TOKEN.
func TokenURL(base, token string) string {
	return strings.TrimSuffix(base, "/") + "/?token=" + url.QueryEscape(token)
}

// tokenCookie is the name of the local token's cookie for the server that
// r reached, or "" when the server has no local token.
func (s *Server) tokenCookie(r *http.Request) string {
	if s.cfg.LocalToken == "" {
		return ""
	}
	if a, ok := localAddr(r).(*net.TCPAddr); ok {
		return "codeagent-token-" + strconv.Itoa(a.Port)
	}
	return "codeagent-token"
}

// login trades a valid local token in /?token= for the cookie and
// redirects to the page; anything else is 401 and sets nothing.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if owner, err := s.auth.lookup(r.URL.Query().Get("token")); err != nil || owner != Anonymous {
		s.writeError(w, r, errBadToken)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: s.tokenCookie(r), Value: s.cfg.LocalToken, Path: "/",
		HttpOnly: true, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

type ownerKey struct{}

// ownerOf is the authenticated owner of a request.
func ownerOf(ctx context.Context) string {
	o, _ := ctx.Value(ownerKey{}).(string)
	return o
}
