package llm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"
)

var testEP = Endpoint{Provider: "openai", BaseURL: "http://localhost:11434/v1", Model: "llama3.1",
	KeyVar: "OPENAI_API_KEY", ModelsHint: "`ollama list`"}

func TestHTTPError(t *testing.T) {
	for _, c := range []struct {
		name      string
		status    int
		header    http.Header
		body      string
		kind      Kind
		retryable bool
		contains  []string
	}{
		{"401 openai", 401, nil, `{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}`,
			KindAuth, false, []string{"OPENAI_API_KEY", "rejected the API key", "Incorrect API key"}},
		{"403", 403, nil, `{"error":{"message":"no access"}}`, KindAuth, false, []string{"llama3.1", "OPENAI_API_KEY"}},
		{"404 ollama string error", 404, nil, `{"error":"model \"llama3.1\" not found, try pulling it first"}`,
			KindNotFound, false, []string{`model "llama3.1" was not found`, "--model", "ollama list"}},
		{"404 vllm", 404, nil, `{"object":"error","message":"The model ` + "`llama3.1`" + ` does not exist.","type":"NotFoundError","code":404}`,
			KindNotFound, false, []string{"was not found"}},
		{"404 anthropic", 404, nil, `{"type":"error","error":{"type":"not_found_error","message":"model: llama3.1"}}`,
			KindNotFound, false, []string{"was not found"}},
		{"404 wrong path", 404, nil, "404 page not found", KindNotFound, false, []string{"--base-url", "/v1"}},
		{"400 unknown model", 400, nil, `{"error":{"message":"model 'x' not found"}}`, KindNotFound, false, nil},
		{"429 seconds", 429, http.Header{"Retry-After": {"12"}}, `{"error":{"message":"Rate limit reached"}}`,
			KindRateLimit, true, []string{"try again in 12s"}},
		{"429 bare", 429, nil, ``, KindRateLimit, true, []string{"rate limiting"}},
		{"500 html from proxy", 502, nil, "<html><body>Bad Gateway</body></html>", KindServer, true, []string{"HTTP 502", "Bad Gateway"}},
		{"529 overloaded", 529, nil, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, KindServer, true, []string{"Overloaded"}},
		{"408", 408, nil, ``, KindTimeout, true, nil},
		{"400 tools", 400, nil, `{"error":{"message":"registry.ollama.ai/library/gemma:2b does not support tools"}}`,
			KindBadRequest, false, []string{"does not support tools"}},
		{"422", 422, nil, `{"detail":"field required"}`, KindBadRequest, false, []string{"field required"}},
		// Ollama, as seen with a broken and with a too large model.
		{"500 ollama load", 500, nil, `{"error":"llama runner process has terminated: error loading model: unable to allocate CUDA0 buffer"}`,
			KindModelLoad, false, []string{`cannot load model "llama3.1"`, "ollama ps", "--model", "unable to allocate"}},
		{"500 ollama memory", 500, nil, `{"error":"model requires more system memory (12.3 GiB) than is available (7.1 GiB)"}`,
			KindModelLoad, false, []string{"cannot load model"}},
		{"500 ollama runner died", 500, nil, `{"error":"llama runner process has terminated: signal: killed"}`,
			KindModelLoad, true, []string{`cannot run model "llama3.1"`, "process stopped"}},
		{"503 llama.cpp still loading", 503, nil, `{"error":{"code":503,"message":"Loading model","type":"unavailable_error"}}`,
			KindServer, true, []string{"temporary"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := c.header
			if h == nil {
				h = http.Header{}
			}
			e := HTTPError(testEP, c.status, h, []byte(c.body))
			if e.Kind != c.kind || e.Retryable != c.retryable || e.StatusCode != c.status {
				t.Errorf("got %s retryable=%v status=%d: %v", e.Kind, e.Retryable, e.StatusCode, e)
			}
			for _, s := range c.contains {
				if !strings.Contains(e.Error(), s) {
					t.Errorf("%q lacks %q", e.Error(), s)
				}
			}
		})
	}
}

func TestErrorDetailTrimsAndSanitises(t *testing.T) {
	long := strings.Repeat("x", 1000)
	if d := errorDetail([]byte(long)); len(d) > 310 {
		t.Errorf("detail not trimmed: %d", len(d))
	}
	if d := errorDetail([]byte("bad \xff byte")); d != "bad ? byte" {
		t.Errorf("detail = %q", d)
	}
	if d := errorDetail([]byte(`{"error":{"message":""}}`)); d != "" {
		t.Errorf("empty structured message should give no detail, got %q", d)
	}
}

func TestTransportError(t *testing.T) {
	live := context.Background()
	done, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()
	refused := &url.Error{Op: "Post", URL: "http://localhost:11434/v1", Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}
	for _, c := range []struct {
		name      string
		ctx       context.Context
		err       error
		kind      Kind
		retryable bool
		contains  string
	}{
		{"refused", live, refused, KindUnreachable, false, "cannot reach the model server at http://localhost:11434/v1"},
		{"dns", live, &net.DNSError{Err: "no such host", Name: "nohost"}, KindUnreachable, false, "--base-url"},
		{"reset", live, fmt.Errorf("read: %w", syscall.ECONNRESET), KindNetwork, true, "broke"},
		{"eof", live, &url.Error{Op: "Post", URL: "x", Err: io.EOF}, KindNetwork, true, "broke"},
		{"our timeout", live, context.DeadlineExceeded, KindTimeout, true, "within 30s"},
		{"timeout after part of the answer", live, &ReadError{Received: 3 << 10, Err: context.DeadlineExceeded}, KindTimeout, true,
			"stopped answering: 3 KiB of the answer had arrived when the time limit of 30s ran out"},
		{"reset after part of the answer", live, WithReceived(syscall.ECONNRESET, 700), KindNetwork, true, "broke after 700 bytes"},
		{"caller canceled", done, context.Canceled, KindCanceled, false, "canceled"},
		{"caller deadline", expired, context.DeadlineExceeded, KindTimeout, false, "deadline"},
		{"garbage", live, errors.New("invalid character '<' looking for beginning of value"), KindBadResponse, false, "openai-compatible"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := TransportError(testEP, c.ctx, 30*time.Second, c.err)
			if e.Kind != c.kind || e.Retryable != c.retryable || !strings.Contains(e.Error(), c.contains) {
				t.Errorf("got %s retryable=%v: %v", e.Kind, e.Retryable, e)
			}
			if !errors.Is(e, c.err) {
				t.Errorf("cause not wrapped: %v", e)
			}
		})
	}
	typed := &Error{Kind: KindAuth}
	if TransportError(testEP, live, 0, fmt.Errorf("wrapped: %w", typed)) != typed {
		t.Error("an *Error inside should be returned as is")
	}
}

func TestCheckAnswer(t *testing.T) {
	for _, c := range []struct {
		name string
		r    Response
		kind Kind
	}{
		{"ok", Response{Text: "print(1)", FinishReason: FinishStop}, ""},
		{"tool calls only", Response{ToolCalls: []ToolCall{{Name: "x"}}, FinishReason: FinishToolCalls}, ""},
		{"empty", Response{FinishReason: FinishStop}, KindEmptyAnswer},
		{"whitespace", Response{Text: " \n\t", FinishReason: FinishStop}, KindEmptyAnswer},
		{"truncated", Response{Text: "def f(", FinishReason: FinishLength}, KindTruncated},
		{"invalid bytes", Response{Text: "a\xffb"}, KindInvalidUTF8},
		// A correctly encoded U+FFFD is text like any other.
		{"replacement char", Response{Text: "print('caf\uFFFD')", FinishReason: FinishStop}, ""},
		{"at the cap", Response{Text: strings.Repeat("x", 64), FinishReason: FinishStop}, ""},
		{"over the cap", Response{Text: strings.Repeat("x", 65), FinishReason: FinishStop}, KindTooLarge},
		{"tool arguments over the cap", Response{ToolCalls: []ToolCall{{Name: "x", Arguments: []byte(`"` + strings.Repeat("x", 64) + `"`)}}}, KindTooLarge},
	} {
		err := CheckAnswer(testEP, c.r, 100, NewAnswerBody(testEP, 64))
		if KindOf(err) != c.kind {
			t.Errorf("%s: got %v, want kind %q", c.name, err, c.kind)
		}
	}
}

func TestIsRetryableAndKindOf(t *testing.T) {
	e := fmt.Errorf("ctx: %w", &Error{Kind: KindServer, Retryable: true})
	if !IsRetryable(e) || KindOf(e) != KindServer || IsRetryable(errors.New("x")) || KindOf(nil) != "" {
		t.Error("IsRetryable/KindOf disagree with the wrapped *Error")
	}
}
