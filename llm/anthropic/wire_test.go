package anthropic_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/codeagent/codeagent/llm"
	"github.com/codeagent/codeagent/llm/anthropic"
	"github.com/codeagent/codeagent/llm/llmtest"
)

func newProvider(t *testing.T, cfg llm.Config) *anthropic.Provider {
	t.Helper()
	p, err := anthropic.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRequestShape(t *testing.T) {
	srv := llmtest.NewAnthropicServer(t, llmtest.Say("ok"))
	p := newProvider(t, llmtest.Config(llm.ProviderAnthropic, srv.BaseURL))
	call := llm.ToolCall{ID: "toolu_1", Name: "run", Arguments: json.RawMessage(`{"code":"print(1)"}`)}
	_, err := p.Chat(context.Background(), llm.Request{
		System: "be brief",
		Tools: []llm.Tool{{Name: "run", Description: "run code",
			Parameters: json.RawMessage(`{"type":"object","properties":{"code":{"type":"string"}},"required":["code"],"additionalProperties":false}`)}},
		Messages: []llm.Message{
			{Role: llm.RoleUser, Content: "go"},
			{Role: llm.RoleAssistant, Content: "running", ToolCalls: []llm.ToolCall{call, {ID: "toolu_2", Name: "run"}}},
			{Role: llm.RoleTool, ToolCallID: "toolu_1", Content: "1"},
			{Role: llm.RoleTool, ToolCallID: "toolu_2", Content: "2"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	r := srv.Requests()[0]
	if r.Header.Get("X-Api-Key") != "test-key" || r.Header.Get("Anthropic-Version") == "" {
		t.Errorf("headers = %v", r.Header)
	}
	var body struct {
		System   []struct{ Text string } `json:"system"`
		Messages []struct {
			Role    string           `json:"role"`
			Content []map[string]any `json:"content"`
		} `json:"messages"`
		Tools []struct {
			Name        string         `json:"name"`
			InputSchema map[string]any `json:"input_schema"`
		} `json:"tools"`
		MaxTokens int `json:"max_tokens"`
	}
	if err := json.Unmarshal(r.Body, &body); err != nil {
		t.Fatal(err)
	}
	if len(body.System) != 1 || body.System[0].Text != "be brief" || body.MaxTokens != 321 {
		t.Errorf("system/max_tokens: %s", r.Body)
	}
	// user, assistant (text + 2 tool_use), user (2 tool_result merged)
	if len(body.Messages) != 3 || body.Messages[2].Role != "user" || len(body.Messages[2].Content) != 2 ||
		body.Messages[2].Content[1]["type"] != "tool_result" || len(body.Messages[1].Content) != 3 {
		t.Errorf("messages: %s", r.Body)
	}
	s := body.Tools[0].InputSchema
	if s["type"] != "object" || s["additionalProperties"] != false || s["required"] == nil || s["properties"] == nil {
		t.Errorf("input_schema = %v", s)
	}
}

func TestStreamErrorEvent(t *testing.T) {
	body := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"x\",\"content\":[],\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n" +
		"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"
	srv := llmtest.NewAnthropicServer(t, llmtest.Reply{Body: body, Header: map[string]string{"Content-Type": "text/event-stream"}})
	_, err := newProvider(t, llmtest.Config(llm.ProviderAnthropic, srv.BaseURL)).Stream(context.Background(),
		llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "x"}}}, nil)
	if llm.KindOf(err) != llm.KindServer || !llm.IsRetryable(err) || !strings.Contains(err.Error(), "Overloaded") {
		t.Errorf("err = %v", err)
	}
}

func TestCacheUsage(t *testing.T) {
	srv := llmtest.NewAnthropicServer(t, llmtest.Reply{Text: "ok", Usage: &llm.Usage{InputTokens: 5, OutputTokens: 2, CacheReadTokens: 100, CacheWriteTokens: 7}})
	resp, err := newProvider(t, llmtest.Config(llm.ProviderAnthropic, srv.BaseURL)).Stream(context.Background(),
		llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "x"}}}, nil)
	if err != nil || resp.Usage != (llm.Usage{InputTokens: 5, OutputTokens: 2, CacheReadTokens: 100, CacheWriteTokens: 7}) {
		t.Errorf("usage %+v err %v", resp.Usage, err)
	}
}

func TestIgnoresSDKEnvironment(t *testing.T) {
	t.Setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:1")
	t.Setenv("ANTHROPIC_API_KEY", "env-key")
	srv := llmtest.NewAnthropicServer(t, llmtest.Say("ok"))
	if _, err := newProvider(t, llmtest.Config(llm.ProviderAnthropic, srv.BaseURL)).Chat(context.Background(),
		llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "x"}}}); err != nil {
		t.Fatal(err)
	}
	if k := srv.Requests()[0].Header.Get("X-Api-Key"); k != "test-key" {
		t.Errorf("key = %q", k)
	}
}
