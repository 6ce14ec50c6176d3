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

// An Anthropic-compatible proxy in front of a model without tools refuses
// them: the request goes again without, once, and the answer says so.
func TestToolsRefusedFallsBackToText(t *testing.T) {
	req := llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}},
		Tools: []llm.Tool{{Name: "run", Parameters: json.RawMessage(`{"type":"object","properties":{}}`)}}}
	for _, stream := range []bool{false, true} {
		srv := llmtest.NewAnthropicServer(t, llmtest.Fail(400, "tools: this model does not support tool use"), llmtest.Say("plain answer"))
		p, err := anthropic.New(llmtest.Config(llm.ProviderAnthropic, srv.BaseURL), nil)
		if err != nil {
			t.Fatal(err)
		}
		var resp llm.Response
		if stream {
			resp, err = p.Stream(context.Background(), req, nil)
		} else {
			resp, err = p.Chat(context.Background(), req)
		}
		if err != nil || resp.Text != "plain answer" || !resp.ToolsDropped {
			t.Fatalf("stream=%v: resp %+v err %v", stream, resp, err)
		}
		if len(resp.Notes) != 1 || !strings.Contains(resp.Notes[0], "without tools") {
			t.Errorf("notes = %q", resp.Notes)
		}
		reqs := srv.Requests()
		if len(reqs) != 2 || reqs[0].JSON["tools"] == nil || reqs[1].JSON["tools"] != nil {
			t.Errorf("tools sent: first %v, second %v", reqs[0].JSON["tools"], reqs[1].JSON["tools"])
		}
	}
}

func TestToolErrorResultIsMarked(t *testing.T) {
	srv := llmtest.NewAnthropicServer(t, llmtest.Say("ok"))
	p, err := anthropic.New(llmtest.Config(llm.ProviderAnthropic, srv.BaseURL), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Chat(context.Background(), llm.Request{Messages: []llm.Message{
		{Role: llm.RoleUser, Content: "go"},
		{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "toolu_1", Name: "run", Arguments: json.RawMessage(`{}`)}}},
		{Role: llm.RoleTool, ToolCallID: "toolu_1", Content: "error: no such tool", IsError: true},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if body := string(srv.Requests()[0].Body); !strings.Contains(body, `"is_error":true`) {
		t.Errorf("the tool result is not marked as an error: %s", body)
	}
}
