package llm

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strings"
	"time"
)

// Provider names accepted in Config.Provider.
const (
	ProviderOpenAI    = "openai"
	ProviderAnthropic = "anthropic"
)

// ProviderNames lists the known providers, for help texts.
func ProviderNames() []string { return []string{ProviderOpenAI, ProviderAnthropic} }

// Environment variables read by [Resolve].
const (
	EnvProvider         = "CODEAGENT_PROVIDER"
	EnvModel            = "CODEAGENT_MODEL"
	EnvOpenAIKey        = "OPENAI_API_KEY"
	EnvOpenAIBaseURL    = "OPENAI_BASE_URL"
	EnvAnthropicKey     = "ANTHROPIC_API_KEY"
	EnvAnthropicBase    = "ANTHROPIC_BASE_URL"
	defaultOpenAIURL    = "https://api.openai.com/v1"
	defaultAnthropicURL = "https://api.anthropic.com"
)

// Config is everything a backend needs. Build it with [Resolve] (defaults,
// then environment, then overrides such as CLI flags) or by hand; backends
// call [Config.Validate] before use.
type Config struct {
	Provider string // "openai" or "anthropic"
	Model    string
	// BaseURL of the API, e.g. http://localhost:11434/v1 for Ollama.
	BaseURL string
	// APIKey may be empty when BaseURL is local (see [IsLocalURL]).
	APIKey string
	// KeyVar is the environment variable the key belongs in, for messages.
	KeyVar string
	// Timeout bounds one request attempt, streaming included; 0 means none.
	Timeout time.Duration
	// MaxTokens is the answer cap used when a Request sets none.
	MaxTokens int
	// MaxAnswerBytes caps the size of an answer (text and tool arguments):
	// a backend stops reading there and returns a [KindTooLarge] error.
	// 0 means [DefaultMaxAnswerBytes].
	MaxAnswerBytes int64
	// Retry is the policy of the [Retry] decorator.
	Retry RetryPolicy
}

// DefaultModel is the model used against a provider's own hosted API when
// none is given. It is a convenience, not a recommendation; pass --model.
func DefaultModel(provider string) string {
	switch provider {
	case ProviderOpenAI:
		return "gpt-4o-mini"
	case ProviderAnthropic:
		return "claude-sonnet-4-5"
	}
	return ""
}

// DefaultConfig is the bottom layer for provider: its hosted API, its key
// variable, a 5 minute per-request timeout, 4096 answer tokens, answers of
// at most [DefaultMaxAnswerBytes] and the default retry policy.
func DefaultConfig(provider string) Config {
	c := Config{Provider: provider, Timeout: 5 * time.Minute, MaxTokens: 4096, MaxAnswerBytes: DefaultMaxAnswerBytes,
		Retry: DefaultRetryPolicy()}
	switch provider {
	case ProviderOpenAI:
		c.BaseURL, c.KeyVar = defaultOpenAIURL, EnvOpenAIKey
	case ProviderAnthropic:
		c.BaseURL, c.KeyVar = defaultAnthropicURL, EnvAnthropicKey
	}
	return c
}

// Overrides are the top layer, typically from command-line flags; empty
// fields leave the layer below alone.
type Overrides struct {
	Provider string
	Model    string
	BaseURL  string
	Timeout  time.Duration
	// MaxAnswerBytes, when positive, replaces the answer size cap.
	MaxAnswerBytes int64
}

// Resolve builds a Config in layers: defaults, then the environment read
// through getenv, then o; then it validates. The provider comes from
// o.Provider, else CODEAGENT_PROVIDER, else openai. The base URL comes from
// o.BaseURL, else OPENAI_BASE_URL (openai) or ANTHROPIC_BASE_URL
// (anthropic), else the hosted API. The model comes from o.Model, else
// CODEAGENT_MODEL, else [DefaultModel] when talking to the hosted API.
// The key comes from OPENAI_API_KEY or ANTHROPIC_API_KEY.
//
// On error the Config is still returned, filled as far as it got.
func Resolve(getenv func(string) string, o Overrides) (Config, error) {
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	env := func(k string) string { return strings.TrimSpace(getenv(k)) }
	provider := strings.ToLower(strings.TrimSpace(o.Provider))
	if provider == "" {
		provider = strings.ToLower(env(EnvProvider))
	}
	if provider == "" {
		provider = ProviderOpenAI
	}
	c := DefaultConfig(provider)
	hosted := c.BaseURL
	c.Model = env(EnvModel)
	switch provider {
	case ProviderOpenAI:
		c.APIKey = env(EnvOpenAIKey)
		if v := env(EnvOpenAIBaseURL); v != "" {
			c.BaseURL = v
		}
	case ProviderAnthropic:
		c.APIKey = env(EnvAnthropicKey)
		if v := env(EnvAnthropicBase); v != "" {
			c.BaseURL = v
		}
	}
	if v := strings.TrimSpace(o.Model); v != "" {
		c.Model = v
	}
	if v := strings.TrimSpace(o.BaseURL); v != "" {
		c.BaseURL = v
	}
	if o.Timeout != 0 {
		c.Timeout = o.Timeout
	}
	if o.MaxAnswerBytes != 0 {
		c.MaxAnswerBytes = o.MaxAnswerBytes
	}
	if c.Model == "" && strings.TrimRight(c.BaseURL, "/") == hosted {
		c.Model = DefaultModel(provider)
	}
	return c, c.Validate()
}

// FieldError is a Config field that cannot be used, with one sentence
// saying what to do.
type FieldError struct {
	Field   string // "provider", "model", "base_url", "api_key", ...
	Message string
}

func (e *FieldError) Error() string { return e.Message }

// Validate reports every unusable field as a [*FieldError], joined.
func (c Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
	}
	known := false
	for _, p := range ProviderNames() {
		known = known || c.Provider == p
	}
	if !known {
		bad("provider", "unknown provider %q: use --provider %s (or set %s)", c.Provider, strings.Join(ProviderNames(), " or --provider "), EnvProvider)
		return errors.Join(errs...) // the other fields depend on the provider
	}
	u, err := url.Parse(c.BaseURL)
	switch {
	case c.BaseURL == "":
		bad("base_url", "no base URL: pass --base-url, e.g. --base-url http://localhost:11434/v1")
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		bad("base_url", "base URL %q is not an http(s) URL: pass e.g. --base-url http://localhost:11434/v1", c.BaseURL)
	}
	if c.Model == "" {
		bad("model", "no model for %s: pass --model or set %s (for Ollama, a name that `ollama list` shows)", c.BaseURL, EnvModel)
	}
	if c.APIKey == "" && !IsLocalURL(c.BaseURL) {
		keyVar := c.KeyVar
		if keyVar == "" {
			keyVar = DefaultConfig(c.Provider).KeyVar
		}
		bad("api_key", "no API key for %s: set %s, or point --base-url at a local server", c.Provider, keyVar)
	}
	if c.Timeout < 0 {
		bad("timeout", "timeout %s is negative: pass a positive duration such as 5m", c.Timeout)
	}
	if c.MaxTokens < 0 {
		bad("max_tokens", "max tokens %d is negative", c.MaxTokens)
	}
	if c.MaxAnswerBytes < 0 || c.MaxAnswerBytes > MaxAnswerLimit {
		bad("max_answer_bytes", "answer size limit %d is not between 1 and %d bytes (%s)", c.MaxAnswerBytes, int64(MaxAnswerLimit), FormatBytes(MaxAnswerLimit))
	}
	return errors.Join(errs...)
}

// MaxAnswerLimit is the largest answer size cap a Config may set.
const MaxAnswerLimit = 256 << 20

// AnswerCap is the answer size cap in force.
func (c Config) AnswerCap() int64 {
	if c.MaxAnswerBytes <= 0 {
		return DefaultMaxAnswerBytes
	}
	return c.MaxAnswerBytes
}

// NeedsKey reports whether the base URL is a remote server that needs a key.
func (c Config) NeedsKey() bool { return !IsLocalURL(c.BaseURL) }

// IsLocalURL reports whether raw points at this machine or a private
// network: localhost, loopback, private and link-local addresses, names
// ending in .local, .lan, .internal or .home.arpa, and single-label names
// such as a container called "ollama". Such servers need no API key.
func IsLocalURL(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil {
		return false
	}
	host := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
	if host == "" {
		return false
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		ip = ip.Unmap()
		return ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsUnspecified()
	}
	if host == "localhost" || !strings.Contains(host, ".") {
		return true
	}
	for _, suffix := range []string{".localhost", ".local", ".lan", ".internal", ".home.arpa"} {
		if strings.HasSuffix(host, suffix) {
			return true
		}
	}
	return false
}

// EndpointFor is Endpoint for a request that may name its own model.
func (c Config) EndpointFor(model string) Endpoint {
	if model != "" {
		c.Model = model
	}
	return c.Endpoint()
}

// Endpoint describes c for error messages.
func (c Config) Endpoint() Endpoint {
	base := strings.TrimRight(c.BaseURL, "/")
	hint := "GET " + base + "/models"
	if c.Provider == ProviderAnthropic {
		hint = "GET " + base + "/v1/models"
	}
	if u, err := url.Parse(c.BaseURL); err == nil && u.Port() == "11434" {
		hint = "`ollama list`"
	}
	return Endpoint{Provider: c.Provider, BaseURL: c.BaseURL, Model: c.Model, KeyVar: c.KeyVar, ModelsHint: hint}
}
