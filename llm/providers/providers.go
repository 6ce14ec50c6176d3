// Package providers is the one place where llm backends are registered: it
// picks the backend named in llm.Config.Provider and wraps it in the
// standard decorators. It exists apart from package llm because the
// backends import llm.
package providers

import (
	"fmt"
	"log/slog"
	"strings"

	"github.com/codeagent/codeagent/llm"
	"github.com/codeagent/codeagent/llm/anthropic"
	"github.com/codeagent/codeagent/llm/openai"
)

// Backend returns the bare backend for cfg.Provider, without decorators.
// logger may be nil.
func Backend(cfg llm.Config, logger *slog.Logger) (llm.Provider, error) {
	switch cfg.Provider {
	case llm.ProviderOpenAI:
		return openai.New(cfg, logger)
	case llm.ProviderAnthropic:
		return anthropic.New(cfg, logger)
	}
	return nil, &llm.FieldError{Field: "provider", Message: fmt.Sprintf(
		"unknown provider %q: use --provider %s", cfg.Provider, strings.Join(llm.ProviderNames(), " or --provider "))}
}

// New returns the backend for cfg wrapped as Retry(Metered(backend)): every
// attempt's usage lands in meter (when meter is non-nil), and retries follow
// cfg.Retry. logger may be nil.
func New(cfg llm.Config, logger *slog.Logger, meter *llm.Meter) (llm.Provider, error) {
	p, err := Backend(cfg, logger)
	if err != nil {
		return nil, err
	}
	if meter != nil {
		p = llm.NewMetered(p, meter)
	}
	return llm.NewRetry(p, cfg.Retry, logger), nil
}
