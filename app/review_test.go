package app

import (
	"testing"

	"github.com/codeagent/codeagent/llm"
)

// TestResolveReview: without an endpoint of its own the reviewer is the
// main model's endpoint and key; with one, its key is CODEAGENT_REVIEW_API_KEY's
// and never the main model's; a run picks a model, never an endpoint.
func TestResolveReview(t *testing.T) {
	main := &llm.Config{Provider: llm.ProviderOpenAI, BaseURL: "http://127.0.0.1:9/v1", Model: "main", APIKey: "main-key"}
	env := func(k string) string {
		if k == EnvReviewAPIKey {
			return "review-key"
		}
		return "other"
	}
	if c, err := ResolveReview(nil, ReviewOptions{Model: "m"}, env); c != nil || err != nil {
		t.Errorf("no endpoint at all: %+v, %v", c, err)
	}
	c, err := ResolveReview(main, ReviewOptions{}, env)
	if err != nil || c.BaseURL != main.BaseURL || c.APIKey != "main-key" || c.Model != "" {
		t.Fatalf("the main model's endpoint: %+v, %v", c, err)
	}
	if ReviewFor(c, "") != nil {
		t.Error("a reviewer without a model")
	}
	if r := ReviewFor(c, "picked"); r == nil || r.Model != "picked" || r.BaseURL != main.BaseURL || c.Model != "" {
		t.Errorf("a run's model: %+v", r)
	}
	c, err = ResolveReview(main, ReviewOptions{Model: "judge", BaseURL: "https://review.example/v1"}, env)
	if err != nil || c.BaseURL != "https://review.example/v1" || c.APIKey != "review-key" || c.KeyVar != EnvReviewAPIKey {
		t.Fatalf("own endpoint: %+v, %v", c, err)
	}
	if r := ReviewFor(c, ""); r == nil || r.Model != "judge" {
		t.Errorf("the door's model: %+v", r)
	}
	if _, err := ResolveReview(main, ReviewOptions{BaseURL: "https://review.example/v1"}, nil); err == nil {
		t.Error("a remote reviewer without a key was accepted")
	}
	if _, err := ResolveReview(main, ReviewOptions{Provider: "nope"}, env); err == nil {
		t.Error("an unknown provider was accepted")
	}
}
