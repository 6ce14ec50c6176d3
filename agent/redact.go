package agent

import (
	"sort"
	"strings"

	"github.com/codeagent/codeagent/internal/lazyre"
)

// Redacted replaces a secret in everything shown to the model or the user.
const Redacted = "[REDACTED]"

// minSecretLen is the shortest configured secret that is redacted: shorter
// values would blank out ordinary words.
const minSecretLen = 6

// secretPattern is a common key format, redacted even when not
// configured; every match contains one of hints, checked first so that
// large outputs without them skip the regular expression.
type secretPattern struct {
	hints []string
	re    *lazyre.Regexp
}

func (p secretPattern) maybeIn(s string) bool {
	for _, h := range p.hints {
		if strings.Contains(s, h) {
			return true
		}
	}
	return false
}

var secretPatterns = []secretPattern{
	{[]string{"PRIVATE KEY-----"}, lazyre.New(`-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\z)`)},
	{[]string{"sk-ant-"}, lazyre.New(`\bsk-ant-[A-Za-z0-9_\-]{10,}`)},
	{[]string{"sk-"}, lazyre.New(`\bsk-[A-Za-z0-9_\-]{16,}`)},
	{[]string{"AKIA", "ASIA"}, lazyre.New(`\b(?:AKIA|ASIA)[0-9A-Z]{16}\b`)},
	{[]string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_"}, lazyre.New(`\bgh[pousr]_[A-Za-z0-9]{30,}`)},
	{[]string{"github_pat_"}, lazyre.New(`\bgithub_pat_[A-Za-z0-9_]{30,}`)},
	{[]string{"xox"}, lazyre.New(`\bxox[abposr]-[A-Za-z0-9\-]{10,}`)},
	{[]string{"AIza"}, lazyre.New(`\bAIza[0-9A-Za-z_\-]{35}`)},
}

// bearer keeps the scheme word and redacts the token.
var bearer = lazyre.New(`(?i)\b(Bearer\s+)[A-Za-z0-9._~+/=\-]{8,}`)

// Redactor removes secrets from text: configured values (API keys) and the
// common key patterns above. The zero value redacts the patterns only.
type Redactor struct {
	secrets []string
}

// NewRedactor returns a Redactor for the given secret values; empty and
// very short values are ignored.
func NewRedactor(secrets ...string) *Redactor {
	r := &Redactor{}
	for _, s := range secrets {
		s = strings.TrimSpace(s)
		if len(s) >= minSecretLen {
			r.secrets = append(r.secrets, s)
		}
	}
	// Longest first, so that a key containing another is removed whole.
	sort.Slice(r.secrets, func(i, j int) bool { return len(r.secrets[i]) > len(r.secrets[j]) })
	return r
}

// String returns s with every secret replaced by [REDACTED].
func (r *Redactor) String(s string) string {
	if s == "" {
		return s
	}
	if r != nil {
		for _, v := range r.secrets {
			if strings.Contains(s, v) {
				s = strings.ReplaceAll(s, v, Redacted)
			}
		}
	}
	for _, p := range secretPatterns {
		if p.maybeIn(s) {
			s = p.re.ReplaceAllString(s, Redacted)
		}
	}
	if strings.Contains(s, "earer") || strings.Contains(s, "EARER") {
		s = bearer.ReplaceAllString(s, "${1}"+Redacted)
	}
	return s
}

// Bytes is String for output bytes.
func (r *Redactor) Bytes(b []byte) []byte {
	if len(b) == 0 {
		return b
	}
	return []byte(r.String(string(b)))
}
