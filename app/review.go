package app

import (
	"errors"
	"strings"

	"github.com/codeagent/codeagent/llm"
)

// EnvReviewAPIKey holds the reviewer model's API key when the reviewer has
// its own endpoint (ReviewOptions.BaseURL or Provider).
const EnvReviewAPIKey = "CODEAGENT_REVIEW_API_KEY"

// ReviewOptions are a door's reviewer settings, as its operator gives them
// (codeagent's --review-model, --review-base-url, --review-provider).
type ReviewOptions struct {
	Model    string
	BaseURL  string
	Provider string
}

// ResolveReview builds the reviewer's provider configuration, the one
// place every door builds it: with a BaseURL or a Provider the reviewer
// has its own endpoint (the provider's hosted API when no BaseURL is
// given) and its key comes from EnvReviewAPIKey, never the main model's;
// otherwise it is the main model's endpoint and key (main), asked with
// o.Model. The result's Model may be empty: then only a run that names
// one (ReviewFor) has a reviewer. It is nil, without error, when there is
// nothing to review with (no main model and no endpoint of its own).
func ResolveReview(main *llm.Config, o ReviewOptions, getenv func(string) string) (*llm.Config, error) {
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	model := strings.TrimSpace(o.Model)
	base, provider := strings.TrimSpace(o.BaseURL), strings.ToLower(strings.TrimSpace(o.Provider))
	if base == "" && provider == "" {
		if main == nil {
			return nil, nil
		}
		c := *main
		c.Model = model
		return &c, nil
	}
	if provider == "" {
		provider = llm.ProviderOpenAI
		if main != nil {
			provider = main.Provider
		}
	}
	c := llm.DefaultConfig(provider)
	if base != "" {
		c.BaseURL = base
	}
	c.Model = model
	c.APIKey, c.KeyVar = strings.TrimSpace(getenv(EnvReviewAPIKey)), EnvReviewAPIKey
	if main != nil {
		c.Timeout, c.MaxAnswerBytes = main.Timeout, main.MaxAnswerBytes
	}
	check := c
	if check.Model == "" {
		check.Model = "-" // a run may name it
	}
	if err := check.Validate(); err != nil {
		return nil, errors.New("review model: " + err.Error())
	}
	return &c, nil
}

// ReviewFor is the reviewer configuration of one run: base (from
// ResolveReview) asked with model when the run names one, else with
// base's own model; nil when neither names a model (no reviewer). A run
// chooses the model only: the endpoint and key are the door's.
func ReviewFor(base *llm.Config, model string) *llm.Config {
	if base == nil {
		return nil
	}
	c := *base
	if m := strings.TrimSpace(model); m != "" {
		c.Model = m
	}
	if c.Model == "" {
		return nil
	}
	return &c
}
