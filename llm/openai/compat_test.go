package openai_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/codeagent/codeagent/llm"
	"github.com/codeagent/codeagent/llm/llmtest"
	"github.com/codeagent/codeagent/llm/openai"
)

func newProvider(t *testing.T, cfg llm.Config) *openai.Provider {
	t.Helper()
	p, err := openai.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

var askTools = llm.Request{
	Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}},
	Tools:    []llm.Tool{{Name: "run", Parameters: json.RawMessage(`{"type":"object","properties":{}}`)}},
}

func TestToolsRefusedFallsBackToText(t *testing.T) {
	for _, stream := range []bool{false, true} {
		srv := llmtest.NewOpenAIServer(t,
			llmtest.Fail(400, "registry.ollama.ai/library/gemma:2b does not support tools"),
			llmtest.Say("plain answer"))
		p := newProvider(t, llmtest.Config(llm.ProviderOpenAI, srv.BaseURL))
		var resp llm.Response
		var err error
		if stream {
			resp, err = p.Stream(context.Background(), askTools, nil)
		} else {
			resp, err = p.Chat(context.Background(), askTools)
		}
		if err != nil || resp.Text != "plain answer" {
			t.Fatalf("stream=%v: resp %+v err %v", stream, resp, err)
		}
		if len(resp.Notes) != 1 || !strings.Contains(resp.Notes[0], "without tools") || !resp.ToolsDropped {
			t.Errorf("notes = %q, tools dropped %v", resp.Notes, resp.ToolsDropped)
		}
		reqs := srv.Requests()
		if len(reqs) != 2 || reqs[0].JSON["tools"] == nil || reqs[1].JSON["tools"] != nil {
			t.Errorf("tools sent: first %v, second %v", reqs[0].JSON["tools"], reqs[1].JSON["tools"])
		}
	}
}

func TestToolsRefusedOnlyOnce(t *testing.T) {
	srv := llmtest.NewOpenAIServer(t,
		llmtest.Fail(400, "tools are not supported"),
		llmtest.Fail(400, "tools still not supported"))
	p := newProvider(t, llmtest.Config(llm.ProviderOpenAI, srv.BaseURL))
	_, err := p.Chat(context.Background(), askTools)
	if llm.KindOf(err) != llm.KindBadRequest || len(srv.Requests()) != 2 {
		t.Errorf("err %v after %d requests", err, len(srv.Requests()))
	}
}

func TestJSONFormatRefusedFallsBack(t *testing.T) {
	srv := llmtest.NewOpenAIServer(t,
		llmtest.Fail(400, "response_format json_object is not supported by this model"),
		llmtest.Say(`{"a":1}`))
	p := newProvider(t, llmtest.Config(llm.ProviderOpenAI, srv.BaseURL))
	resp, err := p.Chat(context.Background(), llm.Request{JSON: true, Messages: []llm.Message{{Role: llm.RoleUser, Content: "x"}}})
	if err != nil || len(resp.Notes) != 1 {
		t.Fatalf("resp %+v err %v", resp, err)
	}
	reqs := srv.Requests()
	if rf, _ := reqs[0].JSON["response_format"].(map[string]any); rf["type"] != "json_object" || reqs[1].JSON["response_format"] != nil {
		t.Errorf("response_format: %v then %v", reqs[0].JSON["response_format"], reqs[1].JSON["response_format"])
	}
}

func TestOllamaStyleErrorBody(t *testing.T) {
	srv := llmtest.NewOpenAIServer(t, llmtest.Reply{Status: 404, Body: `{"error":"model \"llama3.1\" not found, try pulling it first"}`})
	cfg := llmtest.Config(llm.ProviderOpenAI, srv.BaseURL)
	cfg.Model = "llama3.1"
	_, err := newProvider(t, cfg).Chat(context.Background(), llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "x"}}})
	if llm.KindOf(err) != llm.KindNotFound || !strings.Contains(err.Error(), `model "llama3.1" was not found`) {
		t.Errorf("err = %v", err)
	}
}

func TestProxyHTMLErrorBody(t *testing.T) {
	srv := llmtest.NewOpenAIServer(t, llmtest.Reply{Status: 502, Body: "<html>Bad Gateway</html>", Header: map[string]string{"Content-Type": "text/html"}})
	_, err := newProvider(t, llmtest.Config(llm.ProviderOpenAI, srv.BaseURL)).Chat(context.Background(), llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "x"}}})
	if llm.KindOf(err) != llm.KindServer || !llm.IsRetryable(err) {
		t.Errorf("err = %v", err)
	}
}

func TestMidStreamError(t *testing.T) {
	body := "data: {\"id\":\"1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"par\"},\"finish_reason\":null}]}\n\n" +
		"data: {\"error\":{\"message\":\"model overloaded\",\"type\":\"server_error\"}}\n\n"
	srv := llmtest.NewOpenAIServer(t, llmtest.Reply{Body: body, Header: map[string]string{"Content-Type": "text/event-stream"}})
	var got string
	resp, err := newProvider(t, llmtest.Config(llm.ProviderOpenAI, srv.BaseURL)).Stream(context.Background(),
		llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "x"}}}, func(s string) { got += s })
	if llm.KindOf(err) != llm.KindServer || !strings.Contains(err.Error(), "model overloaded") {
		t.Errorf("err = %v", err)
	}
	if got != "par" || resp.Text != "par" {
		t.Errorf("partial text: deltas %q resp %q", got, resp.Text)
	}
}

func TestAuthHeaderAndStreamUsageOption(t *testing.T) {
	srv := llmtest.NewOpenAIServer(t, llmtest.Say("a"), llmtest.Say("b"))
	cfg := llmtest.Config(llm.ProviderOpenAI, srv.BaseURL)
	req := llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "x"}}}
	if _, err := newProvider(t, cfg).Stream(context.Background(), req, nil); err != nil {
		t.Fatal(err)
	}
	cfg.APIKey = "" // a local server: no key, no header
	if _, err := newProvider(t, cfg).Chat(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	reqs := srv.Requests()
	if got := reqs[0].Header.Get("Authorization"); got != "Bearer test-key" {
		t.Errorf("Authorization = %q", got)
	}
	if opts, _ := reqs[0].JSON["stream_options"].(map[string]any); opts["include_usage"] != true {
		t.Errorf("stream_options = %v", reqs[0].JSON["stream_options"])
	}
	if got := reqs[1].Header.Get("Authorization"); got != "" {
		t.Errorf("keyless Authorization = %q", got)
	}
	if reqs[1].JSON["max_tokens"] != float64(321) || reqs[1].JSON["max_completion_tokens"] != nil {
		t.Errorf("local servers get max_tokens: %s", reqs[1].Body)
	}
}

func TestIgnoresSDKEnvironment(t *testing.T) {
	t.Setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
	t.Setenv("OPENAI_API_KEY", "env-key")
	t.Setenv("OPENAI_ORG_ID", "org-env")
	srv := llmtest.NewOpenAIServer(t, llmtest.Say("ok"))
	if _, err := newProvider(t, llmtest.Config(llm.ProviderOpenAI, srv.BaseURL)).Chat(context.Background(),
		llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "x"}}}); err != nil {
		t.Fatal(err)
	}
	h := srv.Requests()[0].Header
	if h.Get("Authorization") != "Bearer test-key" || h.Get("OpenAI-Organization") != "" {
		t.Errorf("environment leaked into the request: %v", h)
	}
}

func TestOllamaToolCallWithStopFinish(t *testing.T) {
	body := `{"id":"x","object":"chat.completion","created":1,"model":"llama3.1","choices":[{"index":0,"message":{"role":"assistant","content":"","tool_calls":[{"id":"call_a","type":"function","function":{"name":"run","arguments":"{\"code\":\"print(1)\"}"}}]},"finish_reason":"stop"}]}`
	srv := llmtest.NewOpenAIServer(t, llmtest.Reply{Body: body})
	resp, err := newProvider(t, llmtest.Config(llm.ProviderOpenAI, srv.BaseURL)).Chat(context.Background(), askTools)
	if err != nil || resp.FinishReason != llm.FinishToolCalls || len(resp.ToolCalls) != 1 || resp.Usage.Total() != 0 {
		t.Errorf("resp %+v err %v", resp, err)
	}
}

func TestBrokenToolArgumentsStayValidJSON(t *testing.T) {
	srv := llmtest.NewOpenAIServer(t, llmtest.Reply{ToolCalls: []llm.ToolCall{{Name: "run", Arguments: json.RawMessage(`{"code": "print(1)"`)}}})
	resp, err := newProvider(t, llmtest.Config(llm.ProviderOpenAI, srv.BaseURL)).Chat(context.Background(), askTools)
	if err != nil || len(resp.ToolCalls) != 1 || !json.Valid(resp.ToolCalls[0].Arguments) {
		t.Errorf("resp %+v err %v", resp, err)
	}
}
