package llmtest_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/codeagent/codeagent/llm"
	"github.com/codeagent/codeagent/llm/llmtest"
	"github.com/codeagent/codeagent/llm/providers"
)

func TestFakeScriptsRepliesAndRecordsRequests(t *testing.T) {
	f := llmtest.NewFake("one")
	f.Push(llmtest.FakeReply{Err: &llm.Error{Kind: llm.KindRateLimit, Retryable: true}})
	var deltas []string
	r, err := f.Stream(context.Background(), llm.Request{System: "s"}, func(d string) { deltas = append(deltas, d) })
	if err != nil || r.Text != "one" || len(deltas) != 1 {
		t.Fatalf("first: %+v %v %v", r, err, deltas)
	}
	if _, err := f.Chat(context.Background(), llm.Request{}); llm.KindOf(err) != llm.KindRateLimit {
		t.Errorf("second: %v", err)
	}
	if _, err := f.Chat(context.Background(), llm.Request{}); err == nil {
		t.Error("beyond the script: no error")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := f.Chat(ctx, llm.Request{}); llm.KindOf(err) != llm.KindCanceled || !errors.Is(err, context.Canceled) {
		t.Errorf("canceled: %v", err)
	}
	if got := f.Requests(); len(got) != 3 || got[0].System != "s" {
		t.Errorf("requests = %+v", got)
	}
}

func TestServerQueueAndWrongPath(t *testing.T) {
	srv := llmtest.NewOpenAIServer(t, llmtest.Say("a"))
	srv.Push(llmtest.Say("b"))
	if srv.Remaining() != 2 {
		t.Errorf("remaining = %d", srv.Remaining())
	}
	res, err := http.Post(srv.URL+"/nope", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 404 || srv.Remaining() != 2 || len(srv.Requests()) != 0 {
		t.Errorf("wrong path: status %d remaining %d", res.StatusCode, srv.Remaining())
	}
	res, err = http.Post(srv.BaseURL+"/chat/completions", "application/json", strings.NewReader(`{"model":"m","stream":false}`))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if got := srv.Requests(); len(got) != 1 || got[0].Model() != "m" || got[0].Stream {
		t.Errorf("requests = %+v", got)
	}
}

// A Func reply is made from the request it answers, and Text shows what
// the request carried, tool results included, in both protocols.
func TestFuncReplyAndRequestText(t *testing.T) {
	for _, start := range []func(testing.TB, ...llmtest.Reply) *llmtest.Server{llmtest.NewOpenAIServer, llmtest.NewAnthropicServer} {
		srv := start(t, llmtest.Reply{Func: func(req llmtest.Request) llmtest.Reply {
			if strings.Contains(req.Text(), "result: 42") {
				return llmtest.Say("saw it")
			}
			return llmtest.Say("missed it")
		}})
		provider := llm.ProviderOpenAI
		if !strings.HasSuffix(srv.BaseURL, "/v1") {
			provider = llm.ProviderAnthropic
		}
		p, err := providers.New(llmtest.Config(provider, srv.BaseURL), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := p.Chat(context.Background(), llm.Request{System: "be brief", Messages: []llm.Message{
			{Role: llm.RoleUser, Content: "run it"},
			{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "c1", Name: "run", Arguments: []byte(`{"code":"secret args"}`)}}},
			{Role: llm.RoleTool, ToolCallID: "c1", ToolName: "run", Content: "result: 42"},
		}})
		if err != nil || resp.Text != "saw it" {
			t.Fatalf("%s: resp %q, err %v", provider, resp.Text, err)
		}
		text := srv.Requests()[0].Text()
		for _, want := range []string{"be brief", "run it", "result: 42"} {
			if !strings.Contains(text, want) {
				t.Errorf("%s: Text lacks %q: %q", provider, want, text)
			}
		}
		if strings.Contains(text, "secret args") {
			t.Errorf("%s: Text holds tool arguments: %q", provider, text)
		}
	}
}
