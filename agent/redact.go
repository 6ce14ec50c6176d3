package agent

import (
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/codeagent/codeagent/internal/lazyre"
	"github.com/codeagent/codeagent/safety"
)

// Redacted replaces a secret in everything shown to the model or the user.
const Redacted = "[REDACTED]"

// minSecretLen is the shortest configured secret that is redacted: shorter
// values would blank out ordinary words.
const minSecretLen = 6

// secretPattern is a common key format, redacted from output and model
// text even when not configured; every match contains one of hints,
// checked first so that large outputs without them skip the regular
// expression. what names it in a warning about code.
type secretPattern struct {
	hints []string
	re    *lazyre.Regexp
	what  string
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
	{[]string{"PRIVATE KEY-----"}, lazyre.New(`-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\z)`), "the start of a private key block"},
	{[]string{"sk-ant-"}, lazyre.New(`\bsk-ant-[A-Za-z0-9_\-]{10,}`), "an Anthropic API key"},
	{[]string{"sk-"}, lazyre.New(`\bsk-[A-Za-z0-9_\-]{16,}`), "an API key (sk-)"},
	{[]string{"AKIA", "ASIA"}, lazyre.New(`\b(?:AKIA|ASIA)[0-9A-Z]{16}\b`), "an AWS access key id"},
	{[]string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_"}, lazyre.New(`\bgh[pousr]_[A-Za-z0-9]{30,}`), "a GitHub token"},
	{[]string{"github_pat_"}, lazyre.New(`\bgithub_pat_[A-Za-z0-9_]{30,}`), "a GitHub token"},
	{[]string{"xox"}, lazyre.New(`\bxox[abposr]-[A-Za-z0-9\-]{10,}`), "a Slack token"},
	{[]string{"AIza"}, lazyre.New(`\bAIza[0-9A-Za-z_\-]{35}`), "a Google API key"},
}

// bearer keeps the scheme word and redacts the token.
var bearer = lazyre.New(`(?i)\b(Bearer\s+)[A-Za-z0-9._~+/=\-]{8,}`)

// Redactor removes secrets from text: configured values (API keys) and the
// common key patterns above. The zero value redacts the patterns only.
// Code is treated apart (see Code): it is shown as it runs.
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

// String returns s with every secret replaced by [REDACTED]: the
// configured values, then the common key patterns. It is for output and
// model text, never for code (see Code).
func (r *Redactor) String(s string) string {
	if s == "" {
		return s
	}
	s = r.Code(s)
	for _, p := range secretPatterns {
		if p.maybeIn(s) {
			s = p.re.ReplaceAllString(s, Redacted)
		}
	}
	if hasBearer(s) {
		s = bearer.ReplaceAllString(s, "${1}"+Redacted)
	}
	return s
}

// Code returns code with the values of the secrets the Redactor was given
// (the keys and tokens codeagent knows) replaced by [REDACTED] in place,
// and nothing else changed: code is shown, reviewed and recorded as it
// runs, so a pattern never rewrites it, whole lines or blocks least of
// all (a block that looks like a private key could hide lines that run).
// SecretWarnings reports what the patterns would have matched.
func (r *Redactor) Code(s string) string {
	if r == nil || s == "" {
		return s
	}
	for _, v := range r.secrets {
		if strings.Contains(s, v) {
			s = strings.ReplaceAll(s, v, Redacted)
		}
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

func hasBearer(s string) bool { return strings.Contains(s, "earer") || strings.Contains(s, "EARER") }

// RuleSecretLike is the rule of SecretWarnings' warnings.
const RuleSecretLike = "secret-like-text"

// maxSecretWarnings bounds the warnings of one program.
const maxSecretWarnings = 20

// SecretWarnings returns a warning (Kind lint: it never stops a program)
// for each line of code holding text shaped like a secret, which the
// patterns would redact from output: the person approving the code is
// shown it, where it was shown as [REDACTED] before, and the line.
func SecretWarnings(code string) []safety.Finding {
	var out []safety.Finding
	seen := map[int]bool{}
	add := func(at int, what string) {
		line := 1 + strings.Count(code[:at], "\n")
		if seen[line] || len(out) >= maxSecretWarnings {
			return
		}
		seen[line] = true
		start := strings.LastIndexByte(code[:at], '\n') + 1
		end := strings.IndexByte(code[at:], '\n')
		if end < 0 {
			end = len(code) - at
		}
		out = append(out, safety.Finding{Rule: RuleSecretLike, Line: line, Column: utf8.RuneCountInString(code[start:at]) + 1,
			Text:    cutRunes(strings.TrimSpace(code[start:at+end]), 120),
			Message: fmt.Sprintf("this looks like %s; code is shown and recorded as written (only the secrets codeagent knows are masked)", what),
			Hint:    "keep secrets out of code: read them from a file or the environment", Kind: safety.KindLint})
	}
	for _, p := range secretPatterns {
		if p.maybeIn(code) {
			for _, m := range p.re.FindAllStringIndex(code, maxSecretWarnings) {
				add(m[0], p.what)
			}
		}
	}
	if hasBearer(code) {
		for _, m := range bearer.FindAllStringIndex(code, maxSecretWarnings) {
			add(m[0], "a bearer token")
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Line < out[j].Line })
	return out
}
