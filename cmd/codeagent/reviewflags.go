package main

import (
	"flag"
	"strings"

	"github.com/codeagent/codeagent/app"
	"github.com/codeagent/codeagent/llm"
)

// reviewFlags are the reviewer model's flags, for every command that runs
// the agent: the model, and optionally its own endpoint (its key then from
// CODEAGENT_REVIEW_API_KEY). app.ResolveReview makes the configuration.
type reviewFlags struct{ o app.ReviewOptions }

// addReviewFlags registers --review-model, --review-base-url and
// --review-provider on fs.
func addReviewFlags(fs *flag.FlagSet) *reviewFlags {
	f := &reviewFlags{}
	fs.StringVar(&f.o.Model, "review-model", "", "a reviewer model that judges each program before it runs (default: none)")
	fs.StringVar(&f.o.BaseURL, "review-base-url", "", "the reviewer's API base URL (default: the main model's; its key: "+app.EnvReviewAPIKey+")")
	fs.StringVar(&f.o.Provider, "review-provider", "", "with --review-base-url: its provider, "+strings.Join(llm.ProviderNames(), " or ")+" (default: the main model's)")
	return f
}

// resolve is the reviewer's configuration over main (the main model's,
// nil when there is none); nil when there is no reviewer endpoint. A bad
// one is a usage error.
func (f *reviewFlags) resolve(main *llm.Config, getenv func(string) string) (*llm.Config, error) {
	c, err := app.ResolveReview(main, f.o, getenv)
	if err != nil {
		return nil, usageError{err}
	}
	return c, nil
}
