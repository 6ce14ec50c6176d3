package server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
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

var keyName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

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

// owner returns the key name of r's bearer token. Every configured key is
// compared, in constant time, so that timing tells nothing.
func (a *authenticator) owner(r *http.Request) (string, error) {
	if len(a.names) == 0 {
		return Anonymous, nil
	}
	h := r.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return "", errUnauthorized
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(token)))
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

type ownerKey struct{}

// ownerOf is the authenticated owner of a request.
func ownerOf(ctx context.Context) string {
	o, _ := ctx.Value(ownerKey{}).(string)
	return o
}
