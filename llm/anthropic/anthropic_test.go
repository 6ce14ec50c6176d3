package anthropic_test

import (
	"testing"

	"github.com/codeagent/codeagent/llm"
	"github.com/codeagent/codeagent/llm/anthropic"
	"github.com/codeagent/codeagent/llm/llmtest"
)

func TestConformance(t *testing.T) {
	llmtest.RunProviderTests(t, llmtest.Harness{
		Provider:  llm.ProviderAnthropic,
		NewServer: llmtest.NewAnthropicServer,
		New:       func(cfg llm.Config) (llm.Provider, error) { return anthropic.New(cfg, nil) },
	})
}
