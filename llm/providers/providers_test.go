package providers_test

import (
	"context"
	"testing"

	"github.com/codeagent/codeagent/llm"
	"github.com/codeagent/codeagent/llm/llmtest"
	"github.com/codeagent/codeagent/llm/providers"
)

func TestNewWiresRetryAndMeter(t *testing.T) {
	for _, c := range []struct {
		name string
		srv  func(testing.TB, ...llmtest.Reply) *llmtest.Server
	}{{llm.ProviderOpenAI, llmtest.NewOpenAIServer}, {llm.ProviderAnthropic, llmtest.NewAnthropicServer}} {
		t.Run(c.name, func(t *testing.T) {
			srv := c.srv(t, llmtest.Fail(500, "boom"), llmtest.Say("ok"))
			var m llm.Meter
			p, err := providers.New(llmtest.Config(c.name, srv.BaseURL), nil, &m)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := p.Chat(context.Background(), llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "x"}}})
			if err != nil || resp.Text != "ok" || m.Total().InputTokens != 10 || len(srv.Requests()) != 2 {
				t.Errorf("resp %+v err %v meter %+v requests %d", resp, err, m.Total(), len(srv.Requests()))
			}
		})
	}
}

func TestBackendRejectsBadConfig(t *testing.T) {
	if _, err := providers.Backend(llm.Config{Provider: "gemini"}, nil); err == nil {
		t.Error("unknown provider accepted")
	}
	if _, err := providers.Backend(llm.DefaultConfig(llm.ProviderOpenAI), nil); err == nil {
		t.Error("hosted openai without key accepted")
	}
}
