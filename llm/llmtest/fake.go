package llmtest

import (
	"context"
	"sync"
	"time"

	"github.com/codeagent/codeagent/llm"
)

// Config is a Config for talking to a fake server at baseURL: model
// "test-model", key "test-key", a 10 s per-request timeout and retry waits
// of about a millisecond so tests never sleep for long.
func Config(provider, baseURL string) llm.Config {
	c := llm.DefaultConfig(provider)
	c.BaseURL = baseURL
	c.Model = "test-model"
	c.APIKey = "test-key"
	c.Timeout = 10 * time.Second
	c.MaxTokens = 321
	c.Retry = llm.RetryPolicy{MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: 50 * time.Millisecond}
	return c
}

// FakeReply is one scripted outcome of a [Fake].
type FakeReply struct {
	Response llm.Response
	Err      error
}

// Fake is an in-memory llm.Provider that returns scripted replies in order
// and records the requests. Stream passes the reply's Text to onDelta in
// one piece. A call beyond the script returns an error. Safe for
// concurrent use.
type Fake struct {
	mu      sync.Mutex
	replies []FakeReply
	reqs    []llm.Request
}

var _ llm.Provider = (*Fake)(nil)

// NewFake returns a Fake answering with texts, in order.
func NewFake(texts ...string) *Fake {
	f := &Fake{}
	for _, t := range texts {
		f.Push(FakeReply{Response: llm.Response{Text: t, FinishReason: llm.FinishStop, Model: "fake",
			Usage: llm.Usage{InputTokens: 10, OutputTokens: 5}}})
	}
	return f
}

// Push appends replies to the script.
func (f *Fake) Push(replies ...FakeReply) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.replies = append(f.replies, replies...)
}

// Requests returns a copy of the requests received.
func (f *Fake) Requests() []llm.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]llm.Request(nil), f.reqs...)
}

// Chat implements llm.Provider.
func (f *Fake) Chat(ctx context.Context, req llm.Request) (llm.Response, error) {
	if err := ctx.Err(); err != nil {
		return llm.Response{}, &llm.Error{Kind: llm.KindCanceled, Message: "the model request was canceled", Err: err}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reqs = append(f.reqs, req)
	if len(f.replies) == 0 {
		return llm.Response{}, &llm.Error{Kind: llm.KindBadResponse, Provider: "fake", Message: "llmtest.Fake: no scripted reply left"}
	}
	r := f.replies[0]
	f.replies = f.replies[1:]
	return r.Response, r.Err
}

// Stream implements llm.Provider.
func (f *Fake) Stream(ctx context.Context, req llm.Request, onDelta func(string)) (llm.Response, error) {
	resp, err := f.Chat(ctx, req)
	if onDelta != nil && resp.Text != "" {
		onDelta(resp.Text)
	}
	return resp, err
}
