package app

import (
	"github.com/codeagent/codeagent/llm"
)

// EnvReviewKey holds the API key of a reviewer model at an endpoint of its
// own (ReviewModel.BaseURL).
const EnvReviewKey = "CODEAGENT_REVIEW_API_KEY"

// ReviewModel names the reviewer model of runs, as an operator gives it
// (flags, the manifest): Model on the main model's endpoint, or at
// BaseURL (with Provider) whose key is EnvReviewKey's. The main model's key
// never goes to another endpoint, and a request never names one: an API
// caller may choose only the model.
type ReviewModel struct {
	Model    string
	BaseURL  string
	Provider string
}

// Config is the reviewer's provider configuration, derived from main's;
// nil when no model is named.
func (r ReviewModel) Config(main llm.Config, getenv func(string) string) (*llm.Config, error) {
	if r.Model == "" {
		if r.BaseURL != "" || r.Provider != "" {
			return nil, Errorf(Invalid, "a review endpoint or provider needs a review model (--review-model)")
		}
		return nil, nil
	}
	c := main
	c.Model = r.Model
	if r.Provider != "" {
		if r.Provider != llm.ProviderOpenAI && r.Provider != llm.ProviderAnthropic {
			return nil, Errorf(Invalid, "review provider %q: want %s or %s", r.Provider, llm.ProviderOpenAI, llm.ProviderAnthropic)
		}
		if r.BaseURL == "" && r.Provider != main.Provider {
			return nil, Errorf(Invalid, "a review provider other than the model's needs its own endpoint (--review-base-url)")
		}
		c.Provider = r.Provider
	}
	if r.BaseURL != "" && r.BaseURL != main.BaseURL {
		c.BaseURL, c.APIKey, c.KeyVar = r.BaseURL, getenv(EnvReviewKey), EnvReviewKey
	}
	return &c, nil
}
