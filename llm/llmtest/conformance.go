package llmtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/codeagent/codeagent/llm"
)

// Harness plugs one backend into [RunProviderTests].
type Harness struct {
	// Provider is the llm.Config.Provider name, e.g. llm.ProviderOpenAI.
	Provider string
	// NewServer starts a fake server speaking the backend's protocol.
	NewServer func(t testing.TB, replies ...Reply) *Server
	// New builds the bare backend (no decorators) for cfg.
	New func(cfg llm.Config) (llm.Provider, error)
}

// RunProviderTests runs the same scenarios against a backend through its
// real SDK code and a fake server of its wire protocol: plain and streamed
// text, tool calls, conversation history, errors (401, 404, 429 with
// Retry-After, 500, connection reset, timeout, unreachable server,
// cancellation), empty, truncated, oversized and non-UTF-8 answers, a
// correctly encoded U+FFFD, streams cut off without their end, servers
// that stall after part of the answer, and retries through llm.Retry.
func RunProviderTests(t *testing.T, h Harness) {
	ctx := context.Background()
	// start returns a fake server scripted with replies and a backend for it.
	start := func(t *testing.T, edit func(*llm.Config), replies ...Reply) (*Server, llm.Provider) {
		t.Helper()
		srv := h.NewServer(t, replies...)
		cfg := Config(h.Provider, srv.BaseURL)
		if edit != nil {
			edit(&cfg)
		}
		p, err := h.New(cfg)
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		return srv, p
	}
	user := func(s string) llm.Request {
		return llm.Request{System: "You write Python.", Messages: []llm.Message{{Role: llm.RoleUser, Content: s}}}
	}
	tool := llm.Tool{Name: "run_python", Description: "Run a Python program.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"code":{"type":"string"}},"required":["code"]}`)}
	call := llm.ToolCall{ID: "call_7", Name: "run_python", Arguments: json.RawMessage(`{"code":"print(1)"}`)}

	for _, streaming := range []bool{false, true} {
		mode := "chat"
		if streaming {
			mode = "stream"
		}
		send := func(p llm.Provider, req llm.Request) (llm.Response, []string, error) {
			if !streaming {
				r, err := p.Chat(ctx, req)
				return r, nil, err
			}
			var deltas []string
			r, err := p.Stream(ctx, req, func(s string) { deltas = append(deltas, s) })
			return r, deltas, err
		}

		t.Run(mode+"/text", func(t *testing.T) {
			reply := Say("Hello, world")
			reply.Chunks = []string{"Hel", "lo, ", "world"}
			reply.Usage = &llm.Usage{InputTokens: 12, OutputTokens: 7}
			srv, p := start(t, nil, reply)
			req := user("say hello")
			req.Temperature = llm.Temp(0.25)
			resp, deltas, err := send(p, req)
			if err != nil {
				t.Fatalf("err = %v", err)
			}
			if resp.Text != "Hello, world" || resp.FinishReason != llm.FinishStop {
				t.Errorf("resp = %q %q", resp.Text, resp.FinishReason)
			}
			if streaming && strings.Join(deltas, "") != "Hello, world" {
				t.Errorf("deltas = %q", deltas)
			}
			if resp.Usage.InputTokens != 12 || resp.Usage.OutputTokens != 7 {
				t.Errorf("usage = %+v", resp.Usage)
			}
			if resp.Model != "test-model" {
				t.Errorf("model = %q", resp.Model)
			}
			got := srv.Requests()
			if len(got) != 1 {
				t.Fatalf("server got %d requests", len(got))
			}
			r := got[0]
			if r.Model() != "test-model" || r.Stream != streaming {
				t.Errorf("request model %q stream %v", r.Model(), r.Stream)
			}
			for _, want := range []string{"You write Python.", "say hello", `"temperature":0.25`, `"max_tokens":321`} {
				if !bytes.Contains(r.Body, []byte(want)) {
					t.Errorf("request body lacks %s: %s", want, r.Body)
				}
			}
		})

		t.Run(mode+"/tool_call", func(t *testing.T) {
			srv, p := start(t, nil, Reply{ToolCalls: []llm.ToolCall{call}, Usage: &llm.Usage{InputTokens: 3, OutputTokens: 4}})
			req := user("run it")
			req.Tools = []llm.Tool{tool}
			resp, _, err := send(p, req)
			if err != nil {
				t.Fatalf("err = %v", err)
			}
			if resp.FinishReason != llm.FinishToolCalls || len(resp.ToolCalls) != 1 {
				t.Fatalf("resp = %+v", resp)
			}
			tc := resp.ToolCalls[0]
			if tc.ID != "call_7" || tc.Name != "run_python" || !jsonEqual(tc.Arguments, call.Arguments) {
				t.Errorf("tool call = %+v (%s)", tc, tc.Arguments)
			}
			body := srv.Requests()[0].Body
			for _, want := range []string{`"run_python"`, `"Run a Python program."`, `"code"`, `"required":["code"]`} {
				if !bytes.Contains(body, []byte(want)) {
					t.Errorf("request body lacks %s: %s", want, body)
				}
			}
		})

		t.Run(mode+"/truncated", func(t *testing.T) {
			_, p := start(t, nil, Reply{Text: "def f(", Finish: llm.FinishLength, Usage: &llm.Usage{InputTokens: 5, OutputTokens: 321}})
			resp, _, err := send(p, user("x"))
			wantKind(t, err, llm.KindTruncated, false)
			if resp.Text != "def f(" || resp.Usage.OutputTokens != 321 {
				t.Errorf("partial response lost: %+v", resp)
			}
		})

		t.Run(mode+"/empty", func(t *testing.T) {
			_, p := start(t, nil, Reply{Text: "", Usage: &llm.Usage{InputTokens: 5}})
			_, _, err := send(p, user("x"))
			wantKind(t, err, llm.KindEmptyAnswer, false)
		})

		t.Run(mode+"/invalid_utf8", func(t *testing.T) {
			_, p := start(t, nil, Reply{Text: "print('caf\xe9')\n\xff\xfe"})
			_, _, err := send(p, user("x"))
			wantKind(t, err, llm.KindInvalidUTF8, false)
		})

		t.Run(mode+"/replacement_character_is_text", func(t *testing.T) {
			_, p := start(t, nil, Say("print('caf\uFFFD')"))
			resp, _, err := send(p, user("x"))
			if err != nil || resp.Text != "print('caf\uFFFD')" {
				t.Errorf("resp = %q, err = %v", resp.Text, err)
			}
		})

		t.Run(mode+"/too_large", func(t *testing.T) {
			// A 1 GB answer against a 64 KiB cap: reading must stop at the
			// cap, long before the answer would have arrived.
			srv, p := start(t, func(c *llm.Config) { c.MaxAnswerBytes = 64 << 10 },
				Reply{Text: strings.Repeat("x", 10<<10) + "\n", Repeat: 100000})
			began := time.Now()
			resp, deltas, err := send(p, user("x"))
			e := wantKind(t, err, llm.KindTooLarge, false)
			if e != nil && !strings.Contains(e.Message, "64 KiB") {
				t.Errorf("message should name the cap: %v", e)
			}
			if got := len(resp.Text) + len(strings.Join(deltas, "")); len(resp.Text) > 64<<10 || got > 128<<10 {
				t.Errorf("kept %d bytes of text, %d of deltas", len(resp.Text), got)
			}
			if d := time.Since(began); d > 5*time.Second {
				t.Errorf("took %v: the answer was read on", d)
			}
			if n := len(srv.Requests()); n != 1 {
				t.Errorf("server got %d requests, want 1", n)
			}
		})

		t.Run(mode+"/stalls_after_part", func(t *testing.T) {
			_, p := start(t, func(c *llm.Config) { c.Timeout = 300 * time.Millisecond },
				Reply{Text: "def main():\n    print('partial answer')\n", Stall: true, Usage: &llm.Usage{InputTokens: 1}})
			_, _, err := send(p, user("x"))
			e := wantKind(t, err, llm.KindTimeout, true)
			if e != nil && (!strings.Contains(e.Message, "stopped answering") || !strings.Contains(e.Message, "of the answer had arrived")) {
				t.Errorf("message should say that part arrived: %v", e)
			}
		})

		t.Run(mode+"/no_usage_extra_fields", func(t *testing.T) {
			_, p := start(t, nil, Reply{Text: "ok", Extra: map[string]any{"x_vendor": map[string]any{"timings": 1.5}}})
			resp, _, err := send(p, user("x"))
			if err != nil || resp.Text != "ok" || !resp.Usage.IsZero() {
				t.Errorf("resp = %+v, err = %v", resp, err)
			}
		})

		t.Run(mode+"/401", func(t *testing.T) {
			_, p := start(t, nil, Fail(401, "invalid x-api-key"))
			_, _, err := send(p, user("x"))
			e := wantKind(t, err, llm.KindAuth, false)
			if e != nil && (!strings.Contains(e.Message, Config(h.Provider, "").KeyVar) || e.StatusCode != 401) {
				t.Errorf("message should name the key variable: %v", e)
			}
		})

		t.Run(mode+"/404_model", func(t *testing.T) {
			_, p := start(t, func(c *llm.Config) { c.Model = "no-such-model" },
				Fail(404, "model: no-such-model not found"))
			_, _, err := send(p, user("x"))
			e := wantKind(t, err, llm.KindNotFound, false)
			if e != nil && !strings.Contains(e.Message, `"no-such-model"`) {
				t.Errorf("message should name the model: %v", e)
			}
		})

		t.Run(mode+"/429_retry_after", func(t *testing.T) {
			_, p := start(t, nil, Reply{Status: 429, Error: "slow down", Header: map[string]string{"Retry-After": "7"}})
			_, _, err := send(p, user("x"))
			e := wantKind(t, err, llm.KindRateLimit, true)
			if e != nil && e.RetryAfter != 7*time.Second {
				t.Errorf("RetryAfter = %v", e.RetryAfter)
			}
		})

		t.Run(mode+"/500", func(t *testing.T) {
			_, p := start(t, nil, Fail(500, "boom"))
			_, _, err := send(p, user("x"))
			wantKind(t, err, llm.KindServer, true)
		})

		t.Run(mode+"/connection_reset", func(t *testing.T) {
			_, p := start(t, nil, Reply{Hangup: true})
			_, _, err := send(p, user("x"))
			wantKind(t, err, llm.KindNetwork, true)
		})

		t.Run(mode+"/timeout", func(t *testing.T) {
			_, p := start(t, func(c *llm.Config) { c.Timeout = 100 * time.Millisecond }, Reply{Delay: 20 * time.Second, Text: "late"})
			began := time.Now()
			_, _, err := send(p, user("x"))
			wantKind(t, err, llm.KindTimeout, true)
			if time.Since(began) > 10*time.Second {
				t.Errorf("timeout took %v", time.Since(began))
			}
		})

		t.Run(mode+"/canceled", func(t *testing.T) {
			_, p := start(t, nil, Reply{Delay: 20 * time.Second, Text: "late"})
			cctx, cancel := context.WithCancel(ctx)
			time.AfterFunc(50*time.Millisecond, cancel)
			var err error
			if streaming {
				_, err = p.Stream(cctx, user("x"), nil)
			} else {
				_, err = p.Chat(cctx, user("x"))
			}
			wantKind(t, err, llm.KindCanceled, false)
			if !errors.Is(err, context.Canceled) {
				t.Errorf("errors.Is(err, context.Canceled) = false for %v", err)
			}
		})

		t.Run(mode+"/retry_recovers", func(t *testing.T) {
			srv, p := start(t, nil,
				Reply{Status: 429, Error: "slow down", Header: map[string]string{"Retry-After": "0"}},
				Reply{Hangup: true},
				Fail(503, "overloaded"),
				Say("done"))
			cfg := Config(h.Provider, srv.BaseURL)
			cfg.Retry.MaxAttempts = 4
			resp, _, err := send(llm.NewRetry(p, cfg.Retry, nil), user("x"))
			if err != nil || resp.Text != "done" {
				t.Fatalf("resp = %+v, err = %v", resp, err)
			}
			if n := len(srv.Requests()); n != 4 {
				t.Errorf("server got %d requests, want 4", n)
			}
		})
	}

	t.Run("stream/cut_after_text", func(t *testing.T) {
		// The model's process died after some text: a clear error, no
		// retry (the text was delivered), the partial text kept.
		srv, p := start(t, nil, Reply{Text: "def f(x):\n    return", Cut: true}, Say("unused"))
		cfg := Config(h.Provider, srv.BaseURL)
		var deltas []string
		resp, err := llm.NewRetry(p, cfg.Retry, nil).Stream(ctx, user("x"), func(s string) { deltas = append(deltas, s) })
		e := wantKind(t, err, llm.KindBroken, true)
		if e != nil && !strings.Contains(e.Message, "before it was complete") {
			t.Errorf("message: %v", e)
		}
		if resp.Text != "def f(x):\n    return" || strings.Join(deltas, "") != resp.Text || srv.Remaining() != 1 {
			t.Errorf("resp %q deltas %q, %d replies left", resp.Text, deltas, srv.Remaining())
		}
	})

	t.Run("stream/cut_before_text_is_retried", func(t *testing.T) {
		srv, p := start(t, nil, Reply{Cut: true}, Say("done"))
		cfg := Config(h.Provider, srv.BaseURL)
		resp, err := llm.NewRetry(p, cfg.Retry, nil).Stream(ctx, user("x"), nil)
		if err != nil || resp.Text != "done" || len(srv.Requests()) != 2 {
			t.Errorf("resp %q err %v after %d requests", resp.Text, err, len(srv.Requests()))
		}
	})

	t.Run("history_with_tool_results", func(t *testing.T) {
		srv, p := start(t, nil, Say("it printed 1"))
		req := llm.Request{System: "sys", Tools: []llm.Tool{tool}, Messages: []llm.Message{
			{Role: llm.RoleUser, Content: "run print(1)"},
			{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{call}},
			{Role: llm.RoleTool, ToolCallID: "call_7", ToolName: "run_python", Content: "stdout: 1"},
			{Role: llm.RoleUser, Content: "what happened?"},
		}}
		if _, err := p.Chat(ctx, req); err != nil {
			t.Fatalf("err = %v", err)
		}
		body := srv.Requests()[0].Body
		for _, want := range []string{`"call_7"`, `stdout: 1`, `what happened?`, `print(1)`} {
			if !bytes.Contains(body, []byte(want)) {
				t.Errorf("request body lacks %s: %s", want, body)
			}
		}
	})

	t.Run("json_mode", func(t *testing.T) {
		srv, p := start(t, nil, Say(`{"ok":true}`))
		req := user("answer in JSON")
		req.JSON = true
		resp, err := p.Chat(ctx, req)
		if err != nil || resp.Text != `{"ok":true}` {
			t.Fatalf("resp = %+v, err = %v", resp, err)
		}
		if !bytes.Contains(srv.Requests()[0].Body, []byte("JSON")) {
			t.Errorf("JSON mode not requested: %s", srv.Requests()[0].Body)
		}
	})

	t.Run("request_model_override", func(t *testing.T) {
		srv, p := start(t, nil, Say("ok"))
		req := user("x")
		req.Model = "other-model"
		if _, err := p.Chat(ctx, req); err != nil {
			t.Fatal(err)
		}
		if m := srv.Requests()[0].Model(); m != "other-model" {
			t.Errorf("model = %q", m)
		}
	})

	t.Run("unreachable", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := "http://" + ln.Addr().String()
		ln.Close()
		cfg := Config(h.Provider, addr)
		p, err := h.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		_, err = p.Chat(ctx, user("x"))
		e := wantKind(t, err, llm.KindUnreachable, false)
		if e != nil && !strings.Contains(e.Error(), addr) {
			t.Errorf("message should name %s: %v", addr, e)
		}
	})

	t.Run("wrong_base_url_path", func(t *testing.T) {
		srv := h.NewServer(t)
		p, err := h.New(Config(h.Provider, srv.URL+"/wrong"))
		if err != nil {
			t.Fatal(err)
		}
		_, err = p.Chat(ctx, user("x"))
		e := wantKind(t, err, llm.KindNotFound, false)
		if e != nil && !strings.Contains(e.Message, "--base-url") {
			t.Errorf("message should point at --base-url: %v", e)
		}
	})

	t.Run("metered", func(t *testing.T) {
		_, p := start(t, nil, Say("a"), Reply{Text: "b", Finish: llm.FinishLength, Usage: &llm.Usage{InputTokens: 1, OutputTokens: 2}})
		var m llm.Meter
		mp := llm.NewMetered(p, &m)
		if _, err := mp.Chat(ctx, user("x")); err != nil {
			t.Fatal(err)
		}
		if _, err := mp.Chat(ctx, user("x")); llm.KindOf(err) != llm.KindTruncated {
			t.Fatalf("err = %v", err)
		}
		if got := m.Total(); got.InputTokens != 11 || got.OutputTokens != 7 || m.Requests() != 2 {
			t.Errorf("meter = %+v over %d requests", got, m.Requests())
		}
	})
}

// wantKind fails t unless err is an *llm.Error of kind k with the given
// retryability, and returns it.
func wantKind(t *testing.T, err error, k llm.Kind, retryable bool) *llm.Error {
	t.Helper()
	var e *llm.Error
	if !errors.As(err, &e) {
		t.Fatalf("err = %v (%T), want *llm.Error of kind %s", err, err, k)
	}
	if e.Kind != k || e.Retryable != retryable {
		t.Errorf("err = %v: kind %s retryable %v, want %s %v", e, e.Kind, e.Retryable, k, retryable)
	}
	return e
}

func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return bytes.Equal(xb, yb)
}
