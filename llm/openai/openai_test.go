package openai_test

import (
	"testing"

	"github.com/codeagent/codeagent/llm"
	"github.com/codeagent/codeagent/llm/llmtest"
	"github.com/codeagent/codeagent/llm/openai"
)

func TestConformance(t *testing.T) {
	llmtest.RunProviderTests(t, llmtest.Harness{
		Provider:  llm.ProviderOpenAI,
		NewServer: llmtest.NewOpenAIServer,
		New:       func(cfg llm.Config) (llm.Provider, error) { return openai.New(cfg, nil) },
	})
}
