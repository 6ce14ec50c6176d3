package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/codeagent/codeagent/llm"
	"github.com/codeagent/codeagent/llm/providers"
)

// providerFlags are the model flags of commands that talk to a model. They
// are the top configuration layer, over the environment and the defaults;
// see llm.Resolve.
type providerFlags struct {
	provider  string
	model     string
	baseURL   string
	timeout   time.Duration
	maxAnswer int64
}

// addProviderFlags registers --provider, --model, --base-url,
// --llm-timeout and --max-answer on fs.
func addProviderFlags(fs *flag.FlagSet) *providerFlags {
	f := &providerFlags{}
	fs.StringVar(&f.provider, "provider", "", "model provider: "+strings.Join(llm.ProviderNames(), " or ")+" (env "+llm.EnvProvider+"; default openai)")
	fs.StringVar(&f.model, "model", "", "model name (env "+llm.EnvModel+")")
	fs.StringVar(&f.baseURL, "base-url", "", "API base URL (env "+llm.EnvOpenAIBaseURL+"), e.g. http://localhost:11434/v1; a local one needs no key")
	durationVar(fs, &f.timeout, "llm-timeout", 0, boundRequestTime, "time limit for one model request (default 5m)")
	sizeVar(fs, &f.maxAnswer, "max-answer", sizeBounds{min: 1 << 10, max: llm.MaxAnswerLimit},
		"largest model answer read; a larger one is cut off and the attempt fails (default 1MiB)")
	return f
}

// resolve layers the flags over the environment read through getenv and
// validates the result. A bad configuration is a usage error (exit 2)
// whose message says what to set.
func (f *providerFlags) resolve(getenv func(string) string) (llm.Config, error) {
	cfg, err := llm.Resolve(getenv, llm.Overrides{
		Provider: f.provider, Model: f.model, BaseURL: f.baseURL, Timeout: f.timeout, MaxAnswerBytes: f.maxAnswer,
	})
	if err != nil {
		return cfg, usageError{err}
	}
	return cfg, nil
}

// newProvider builds the configured backend with retries and, when meter
// is non-nil, usage accounting.
func newProvider(cfg llm.Config, logger *slog.Logger, meter *llm.Meter) (llm.Provider, error) {
	p, err := providers.New(cfg, logger, meter)
	if err != nil {
		return nil, usageError{err}
	}
	return p, nil
}

// isProviderError reports whether err came from the model provider (exit
// status exitProvider when it survived the retries).
func isProviderError(err error) bool {
	var e *llm.Error
	return errors.As(err, &e)
}

// describeProvider is a one-line summary for logs and --verbose output; it
// never prints the key.
func describeProvider(cfg llm.Config) string {
	key := "no key"
	if cfg.APIKey != "" {
		key = "key from " + cfg.KeyVar
	}
	return fmt.Sprintf("%s model %s at %s (%s)", cfg.Provider, cfg.Model, cfg.BaseURL, key)
}
