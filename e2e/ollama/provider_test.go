package ollama

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/codeagent/codeagent/llm"
	"github.com/codeagent/codeagent/llm/extract"
	"github.com/codeagent/codeagent/llm/openai"
)

// The provider's side: llm/openai against the real server, behind the
// real retry decorator.

const okAnswer = "```python\nprint(2 + 3)\n```"

// counted counts the attempts that reach the backend (under llm.Retry).
type counted struct {
	llm.Provider
	n atomic.Int32
}

func (c *counted) Chat(ctx context.Context, req llm.Request) (llm.Response, error) {
	c.n.Add(1)
	return c.Provider.Chat(ctx, req)
}

func (c *counted) Stream(ctx context.Context, req llm.Request, onDelta func(string)) (llm.Response, error) {
	c.n.Add(1)
	return c.Provider.Stream(ctx, req, onDelta)
}

// provider is Retry(openai) for the suite's server, with short backoffs.
func provider(t *testing.T) (llm.Provider, *counted) {
	t.Helper()
	cfg := llm.DefaultConfig(llm.ProviderOpenAI)
	cfg.BaseURL, cfg.Model, cfg.Timeout = suite.base, "tiny-ok", 60*time.Second
	cfg.Retry = llm.RetryPolicy{MaxAttempts: 4, BaseDelay: 100 * time.Millisecond, MaxDelay: time.Second}
	b, err := openai.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &counted{Provider: b}
	return llm.NewRetry(c, cfg.Retry, nil), c
}

func hello(model string) llm.Request {
	return llm.Request{Model: model, Messages: []llm.Message{{Role: llm.RoleUser, Content: "Print the sum of 2 and 3."}}}
}

func bounded(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestStreamDeliversTheAnswerInPieces(t *testing.T) {
	need(t)
	p, _ := provider(t)
	var deltas []string
	resp, err := p.Stream(bounded(t, time.Minute), hello("tiny-ok"), func(d string) { deltas = append(deltas, d) })
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	if resp.Text != okAnswer || strings.Join(deltas, "") != resp.Text || resp.FinishReason != llm.FinishStop {
		t.Errorf("text %q, deltas %q, finish %q", resp.Text, deltas, resp.RawFinishReason)
	}
	if resp.Usage.InputTokens == 0 || resp.Usage.OutputTokens == 0 || resp.Model != "tiny-ok" {
		t.Errorf("usage %+v, model %q: want the server's counts (stream_options.include_usage)", resp.Usage, resp.Model)
	}
}

// TestTokenLimitEndsTheAnswer: tiny-long never stops by itself; max tokens
// ends it, with a truncation error that still carries the text and usage.
func TestTokenLimitEndsTheAnswer(t *testing.T) {
	need(t)
	p, _ := provider(t)
	req := hello("tiny-long")
	req.MaxTokens = 40
	for _, stream := range []bool{false, true} {
		var deltas []string
		var resp llm.Response
		var err error
		if stream {
			resp, err = p.Stream(bounded(t, time.Minute), req, func(d string) { deltas = append(deltas, d) })
		} else {
			resp, err = p.Chat(bounded(t, time.Minute), req)
		}
		if llm.KindOf(err) != llm.KindTruncated || !strings.Contains(err.Error(), "max tokens 40") {
			t.Fatalf("stream %v: error %v, want the token limit's", stream, err)
		}
		if resp.FinishReason != llm.FinishLength || resp.Usage.OutputTokens != 40 || resp.Text == "" {
			t.Errorf("stream %v: finish %q, usage %+v, %d bytes of text", stream, resp.RawFinishReason, resp.Usage, len(resp.Text))
		}
		if stream && (len(deltas) < 2 || strings.Join(deltas, "") != resp.Text) {
			t.Errorf("stream: %d deltas adding up to %q, text %q", len(deltas), strings.Join(deltas, ""), resp.Text)
		}
	}
}

var runPython = llm.Tool{Name: "run_python", Description: "Run a Python program and return its output.",
	Parameters: json.RawMessage(`{"type":"object","properties":{"code":{"type":"string"}},"required":["code"]}`)}

// TestToolCallRoundTrip: toolcall always calls run_python twice; the calls
// run in codeagent's sandbox, their results go back as tool messages, and
// the server takes the conversation (streamed this time).
func TestToolCallRoundTrip(t *testing.T) {
	need(t)
	p, _ := provider(t)
	req := hello("toolcall")
	req.Tools = []llm.Tool{runPython}
	resp, err := p.Chat(bounded(t, time.Minute), req)
	if err != nil {
		t.Fatalf("chat: %v", err)
	}
	if resp.FinishReason != llm.FinishToolCalls || len(resp.ToolCalls) != 2 || len(resp.Notes) != 0 {
		t.Fatalf("finish %q, %d tool calls, notes %q: want two calls", resp.RawFinishReason, len(resp.ToolCalls), resp.Notes)
	}
	req.Messages = append(req.Messages, llm.Message{Role: llm.RoleAssistant, ToolCalls: resp.ToolCalls})
	for i, tc := range resp.ToolCalls {
		var args struct{ Code string }
		if tc.Name != "run_python" || tc.ID == "" || json.Unmarshal(tc.Arguments, &args) != nil {
			t.Fatalf("call %d: %+v", i, tc)
		}
		want := []string{"print(1)", "print(2)"}[i]
		if args.Code != want {
			t.Fatalf("call %d: code %q, want %q", i, args.Code, want)
		}
		code, out, stderr := codeagentStdin(t, time.Minute, args.Code+"\n", "exec", "--lang", "python", "-")
		if code != 0 {
			t.Fatalf("exec %q: exit %d: %s", args.Code, code, stderr)
		}
		req.Messages = append(req.Messages, llm.Message{Role: llm.RoleTool, ToolCallID: tc.ID, ToolName: tc.Name, Content: out})
	}
	again, err := p.Stream(bounded(t, time.Minute), req, nil)
	if err != nil {
		t.Fatalf("the request with the tool results: %v", err)
	}
	if len(again.ToolCalls) != 2 || again.FinishReason != llm.FinishToolCalls {
		t.Errorf("streamed answer: finish %q, calls %+v", again.RawFinishReason, again.ToolCalls)
	}
	if again.Usage.InputTokens <= resp.Usage.InputTokens {
		t.Errorf("prompt tokens %d then %d: the calls and results did not reach the model", resp.Usage.InputTokens, again.Usage.InputTokens)
	}
}

// TestToolsRefusedFallsBackToText: tiny's template has no tools, so
// Ollama answers 400 "does not support tools"; the request goes again
// without them, says so, and the answer is text the program is taken from.
func TestToolsRefusedFallsBackToText(t *testing.T) {
	need(t)
	p, c := provider(t)
	for _, model := range []string{"tiny", "tiny-ok"} {
		c.n.Store(0)
		req := hello(model)
		req.Tools, req.MaxTokens, req.Temperature = []llm.Tool{runPython}, 256, llm.Temp(0)
		resp, err := p.Chat(bounded(t, time.Minute), req)
		if err != nil && llm.KindOf(err) != llm.KindTruncated {
			t.Fatalf("%s: %v", model, err)
		}
		if len(resp.Notes) != 1 || !strings.Contains(resp.Notes[0], "did not accept tool definitions") || c.n.Load() != 1 {
			t.Errorf("%s: notes %q after %d attempts: want the fallback said once", model, resp.Notes, c.n.Load())
		}
		if len(resp.ToolCalls) != 0 || resp.Text == "" {
			t.Errorf("%s: calls %+v, text %q: want a text answer", model, resp.ToolCalls, resp.Text)
		}
		if model == "tiny-ok" {
			if got, err := extract.Code(resp.Text, "python"); err != nil || strings.TrimSpace(got.Code) != "print(2 + 3)" {
				t.Errorf("the program from %q: %+v, %v", resp.Text, got, err)
			}
		}
	}
}

// TestJSONMode: Ollama constrains the answer to JSON (response_format
// json_object), even from random weights.
func TestJSONMode(t *testing.T) {
	need(t)
	p, _ := provider(t)
	req := hello("tiny")
	req.JSON, req.MaxTokens, req.Temperature = true, 200, llm.Temp(0)
	resp, err := p.Chat(bounded(t, time.Minute), req)
	if err != nil {
		t.Fatalf("chat: %v (text %q)", err, resp.Text)
	}
	if !json.Valid([]byte(resp.Text)) || len(resp.Notes) != 0 {
		t.Errorf("text %q, notes %q: want JSON, as asked", resp.Text, resp.Notes)
	}
}

// TestRunnerKilledMidStream: the model's process dies while tiny-long
// streams. Ollama then ends the stream cleanly but without a finish reason
// or [DONE]; that must be an error worth retrying, never a success.
func TestRunnerKilledMidStream(t *testing.T) {
	need(t)
	blob, err := blobPath("long.gguf")
	if err != nil {
		t.Fatal(err)
	}
	p, _ := provider(t)
	req := hello("tiny-long")
	req.MaxTokens = 100000 // minutes of text: only the kill ends it
	var once sync.Once
	killed, got := 0, 0
	resp, err := p.Stream(bounded(t, time.Minute), req, func(d string) {
		got += len(d)
		once.Do(func() { killed = killRunners(blob) })
	})
	if killed == 0 {
		t.Fatalf("found no runner of tiny-long (%s) to kill", blob)
	}
	if err == nil {
		t.Fatalf("the stream cut by the runner's death came back as a success: %d bytes, finish reason %q", len(resp.Text), resp.RawFinishReason)
	}
	if !llm.IsRetryable(err) || !strings.Contains(err.Error(), suite.base) || !strings.Contains(err.Error(), "try again") {
		t.Errorf("error %q (kind %s, retryable %v): want a retryable error naming the server", err, llm.KindOf(err), llm.IsRetryable(err))
	}
	t.Logf("after %d bytes: %v", got, err)
	// Ollama starts a new runner for the next request.
	if resp, err := p.Chat(bounded(t, time.Minute), hello("tiny-ok")); err != nil || resp.Text != okAnswer {
		t.Errorf("the next request: %q, %v", resp.Text, err)
	}
}

// TestRunnerKilledIsRetried: every runner of tiny-long is killed once it
// has lived a second (loaded, generating; by its own age, so that one an
// earlier test loaded cannot answer this request quickly), so each
// attempt of a chat request gets HTTP 500 from Ollama ("an error was encountered while
// running the model"); the request is retried, then fails with a clear
// error. (Killed sooner, before it answers Ollama's first health check, a
// runner leaves Ollama v0.17.4 waiting for it until the client gives up.)
func TestRunnerKilledIsRetried(t *testing.T) {
	need(t)
	blob, err := blobPath("long.gguf")
	if err != nil {
		t.Fatal(err)
	}
	p, c := provider(t)
	// An attempt whose runner answered within its first second was never
	// killed, which is not what this test is about (tiny-long then
	// stopped early): the scenario runs again, at most three times.
	var resp llm.Response
	var kills int
	for try := 1; ; try++ {
		c.n.Store(0)
		resp, kills, err = chatWhileKilling(t, p, blob)
		if err != nil || kills > 0 || try == 3 {
			break
		}
		t.Logf("try %d: tiny-long answered (%d bytes) before its runner was a second old; again", try, len(resp.Text))
	}
	if err == nil {
		t.Fatalf("success with every runner killed: %d bytes, %d runners killed", len(resp.Text), kills)
	}
	if c.n.Load() < 2 || kills < 2 {
		t.Errorf("%d attempts, %d runners killed: want the request retried", c.n.Load(), kills)
	}
	if msg := err.Error(); !strings.Contains(msg, suite.base) || !strings.Contains(msg, "HTTP 500") || !strings.Contains(msg, "server said: ") {
		t.Errorf("error %q: want the server, the status and Ollama's words", msg)
	}
	t.Logf("%d attempts, %d runners killed: %v", c.n.Load(), kills, err)
	if resp, err := p.Chat(bounded(t, time.Minute), hello("tiny-ok")); err != nil || resp.Text != okAnswer {
		t.Errorf("the next request: %q, %v", resp.Text, err)
	}
}

// chatWhileKilling sends a long chat request to tiny-long while every
// runner of blob is killed once it has lived a second (by its own age, so
// that one an earlier test loaded cannot answer quickly), and returns the
// answer and how many runners were killed.
func chatWhileKilling(t *testing.T, p llm.Provider, blob string) (llm.Response, int, error) {
	stop, stopped := make(chan struct{}), make(chan int)
	go func() {
		n := 0
		for {
			select {
			case <-stop:
				stopped <- n
				return
			case <-time.After(50 * time.Millisecond):
			}
			// By the runner's own age: one an earlier test loaded is
			// killed at once, before it can finish this request.
			for _, pid := range runners(blob) {
				if a, ok := age(pid); ok && a > time.Second && syscall.Kill(pid, syscall.SIGKILL) == nil {
					n++
				}
			}
		}
	}()
	req := hello("tiny-long")
	req.MaxTokens = 100000
	resp, err := p.Chat(bounded(t, 2*time.Minute), req)
	close(stop)
	n := <-stopped
	return resp, n, err
}
