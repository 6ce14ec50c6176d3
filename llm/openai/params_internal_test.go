package openai

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/codeagent/codeagent/llm"
)

func TestHostedOpenAIGetsMaxCompletionTokens(t *testing.T) {
	cfg := llm.DefaultConfig(llm.ProviderOpenAI)
	cfg.Model, cfg.APIKey = "gpt-4o-mini", "sk"
	p, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	params, err := p.params(llm.Request{MaxTokens: 99, Messages: []llm.Message{{Role: llm.RoleUser, Content: "x"}}}, false, false)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(params)
	if !strings.Contains(string(b), `"max_completion_tokens":99`) || strings.Contains(string(b), `"max_tokens"`) {
		t.Errorf("params = %s", b)
	}
}

func TestUnknownRoleAndBadSchema(t *testing.T) {
	cfg := llm.DefaultConfig(llm.ProviderOpenAI)
	cfg.BaseURL, cfg.Model = "http://localhost:1/v1", "m"
	p, _ := New(cfg, nil)
	if _, err := p.params(llm.Request{Messages: []llm.Message{{Role: "wizard"}}}, false, false); err == nil {
		t.Error("unknown role accepted")
	}
	if _, err := p.params(llm.Request{Tools: []llm.Tool{{Name: "t", Parameters: json.RawMessage(`[1]`)}}}, true, false); err == nil {
		t.Error("non-object schema accepted")
	}
}
