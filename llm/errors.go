package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"
)

// Kind classifies a provider failure.
type Kind string

// Error kinds. Retryable ones are marked in [Error.Retryable].
const (
	KindAuth        Kind = "auth"          // 401/403: key missing, wrong or without access
	KindNotFound    Kind = "not_found"     // 404: unknown model or wrong base URL
	KindRateLimit   Kind = "rate_limit"    // 429 (retryable)
	KindServer      Kind = "server"        // 5xx (retryable)
	KindUnreachable Kind = "unreachable"   // connection refused, unknown host
	KindNetwork     Kind = "network"       // connection reset or closed mid-request (retryable)
	KindTimeout     Kind = "timeout"       // per-request timeout (retryable)
	KindBadRequest  Kind = "bad_request"   // 400/413/422: the server refused the request
	KindBadResponse Kind = "bad_response"  // an answer that could not be decoded
	KindEmptyAnswer Kind = "empty_answer"  // no text and no tool calls
	KindTruncated   Kind = "truncated"     // cut off at the token limit
	KindInvalidUTF8 Kind = "invalid_utf8"  // text that is not valid UTF-8
	KindTooLarge    Kind = "too_large"     // an answer over the size cap (Config.MaxAnswerBytes)
	KindBroken      Kind = "broken_stream" // a stream that ended without finishing the answer (retryable)
	KindModelLoad   Kind = "model_load"    // the server cannot load or run the model
	KindCanceled    Kind = "canceled"      // the caller's context ended
)

// Error is the typed failure every provider returns.
type Error struct {
	Kind      Kind
	Provider  string // "openai", "anthropic"
	Retryable bool
	// StatusCode is the HTTP status, 0 when no response arrived.
	StatusCode int
	// RetryAfter is the wait the server asked for (Retry-After), 0 if none.
	RetryAfter time.Duration
	// MaxAttempts, when positive, is the most attempts in all that this
	// failure deserves, below the retry policy's (see [Retry]).
	MaxAttempts int
	// Message is one sentence saying what happened and what to do.
	Message string
	// Detail is what the server said, trimmed; may be empty.
	Detail string
	// Err is the underlying cause, if any.
	Err error
}

func (e *Error) Error() string {
	if e.Detail != "" {
		return fmt.Sprintf("%s (server said: %s)", e.Message, e.Detail)
	}
	return e.Message
}

func (e *Error) Unwrap() error { return e.Err }

// IsRetryable reports whether err is an [*Error] worth retrying.
func IsRetryable(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Retryable
}

// KindOf returns the Kind of err, or "" when err is not an [*Error].
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return ""
}

// Endpoint names what a provider talks to, so that error messages can say
// which address, model and key variable are involved. Provider packages fill
// it from their Config.
type Endpoint struct {
	Provider string // "openai"
	BaseURL  string // as configured
	Model    string
	KeyVar   string // e.g. OPENAI_API_KEY
	// ModelsHint says how to list models, e.g. "GET http://host/v1/models".
	ModelsHint string
}

// HTTPError turns a non-2xx HTTP answer into an [*Error]. body may be nil.
func HTTPError(ep Endpoint, status int, header http.Header, body []byte) *Error {
	detail := errorDetail(body)
	e := &Error{Provider: ep.Provider, StatusCode: status, Detail: detail}
	low := strings.ToLower(detail + " " + string(body))
	gone := strings.Contains(low, "not found") || strings.Contains(low, "not_found") ||
		strings.Contains(low, "does not exist")
	modelMissing := strings.Contains(low, "model") &&
		(gone || (status == http.StatusNotFound && (strings.Contains(low, "no such") || strings.Contains(low, "unknown"))))
	switch {
	case status == http.StatusUnauthorized:
		e.Kind = KindAuth
		e.Message = fmt.Sprintf("%s rejected the API key (HTTP 401): check that %s holds a valid key for this server", ep.addr(), ep.keyVar())
	case status == http.StatusForbidden:
		e.Kind = KindAuth
		e.Message = fmt.Sprintf("%s refused access (HTTP 403): check that the key in %s may use model %q", ep.addr(), ep.keyVar(), ep.Model)
	case status == http.StatusNotFound || (status == http.StatusBadRequest && modelMissing):
		e.Kind = KindNotFound
		if modelMissing || strings.Contains(low, "model_not_found") {
			e.Message = fmt.Sprintf("model %q was not found on %s (HTTP %d): pass a model the server has to --model%s", ep.Model, ep.addr(), status, ep.hint())
		} else {
			e.Message = fmt.Sprintf("nothing answers at %s (HTTP 404): check --base-url (OpenAI-compatible servers usually end in /v1, e.g. http://localhost:11434/v1)", ep.addr())
		}
	case status == http.StatusTooManyRequests:
		e.Kind, e.Retryable = KindRateLimit, true
		e.RetryAfter, _ = ParseRetryAfter(header.Get("Retry-After"), time.Now())
		e.Message = fmt.Sprintf("%s is rate limiting requests (HTTP 429): wait and try again, or lower the request rate", ep.addr())
		if e.RetryAfter > 0 {
			e.Message = fmt.Sprintf("%s is rate limiting requests (HTTP 429): try again in %s", ep.addr(), e.RetryAfter.Round(time.Second))
		}
	case status == http.StatusRequestTimeout:
		e.Kind, e.Retryable = KindTimeout, true
		e.Message = fmt.Sprintf("%s timed out the request (HTTP 408): try again", ep.addr())
	case status >= 500 && modelLoad(low) != "":
		modelLoadError(e, ep, modelLoad(low))
	case status >= 500:
		e.Kind, e.Retryable = KindServer, true
		e.RetryAfter, _ = ParseRetryAfter(header.Get("Retry-After"), time.Now())
		e.Message = fmt.Sprintf("%s had a server error (HTTP %d): this is usually temporary, try again later", ep.addr(), status)
	default:
		e.Kind = KindBadRequest
		e.Message = fmt.Sprintf("%s refused the request (HTTP %d): check the model and request settings", ep.addr(), status)
	}
	return e
}

// Ollama's and llama.cpp's words for a model that cannot be loaded or run.
var (
	loadFailed = []string{"error loading model", "unable to load model", "failed to load model",
		"requires more system memory", "cudamalloc failed"}
	runnerDied = []string{"llama runner process has terminated", "llama runner process no longer running",
		"runner process has terminated", "model runner has unexpectedly stopped"}
)

// modelLoad classifies an error body: "load" when the server says it cannot
// load the model, "runner" when the model's process died, else "".
func modelLoad(low string) string {
	for _, w := range loadFailed {
		if strings.Contains(low, w) {
			return "load"
		}
	}
	for _, w := range runnerDied {
		if strings.Contains(low, w) {
			return "runner"
		}
	}
	return ""
}

// modelLoadError fills e for a model the server cannot load or run.
//
// Retries: a server that says it cannot load the model (a damaged or
// incompatible file, not enough memory) says the same on every try, and each
// try can take minutes of loading, so it gets none. A model process that
// died is retried once: Ollama starts a new one for the next request, which
// helps after a crash or a kill from outside; when loading itself kills it
// (out of memory), the second try fails the same way and the error stands.
func modelLoadError(e *Error, ep Endpoint, why string) {
	e.Kind = KindModelLoad
	if why == "runner" {
		e.Retryable, e.MaxAttempts = true, 2
		e.Message = fmt.Sprintf("%s cannot run model %q: its model process stopped (HTTP %d). The model may not fit in the server's memory: check the server's log%s, or pick a smaller --model", ep.addr(), ep.Model, e.StatusCode, ollamaHint(ep))
		return
	}
	e.Message = fmt.Sprintf("%s cannot load model %q (HTTP %d): the model file may be damaged or incompatible, or need more memory than the server has; check the server's log%s, or pick another --model", ep.addr(), ep.Model, e.StatusCode, ollamaHint(ep))
}

func ollamaHint(ep Endpoint) string {
	if strings.Contains(ep.ModelsHint, "ollama") {
		return " (`ollama ps`, `journalctl -u ollama`)"
	}
	return ""
}

// errorDetail digs the human message out of the error bodies that
// OpenAI, Anthropic, vLLM, Ollama and llama.cpp send.
func errorDetail(body []byte) string {
	body = []byte(strings.TrimSpace(string(body)))
	if len(body) == 0 {
		return ""
	}
	var v struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
		Detail  json.RawMessage `json:"detail"`
	}
	msg, structured := "", false
	if json.Unmarshal(body, &v) == nil {
		structured = len(v.Error) > 0 && string(v.Error) != "null"
		var s string
		var obj struct {
			Message string `json:"message"`
			Code    any    `json:"code"`
			Type    string `json:"type"`
		}
		switch {
		case json.Unmarshal(v.Error, &s) == nil && s != "":
			msg = s
		case json.Unmarshal(v.Error, &obj) == nil && obj.Message != "":
			msg = obj.Message
			if c, ok := obj.Code.(string); ok && c != "" && !strings.Contains(msg, c) {
				msg += " [" + c + "]"
			}
		case v.Message != "":
			msg = v.Message
		case json.Unmarshal(v.Detail, &s) == nil && s != "":
			msg = s
		}
	}
	if msg == "" && !structured {
		msg = string(body)
	}
	msg = strings.Join(strings.Fields(msg), " ")
	if !utf8.ValidString(msg) {
		msg = strings.ToValidUTF8(msg, "?")
	}
	if len(msg) > 300 {
		msg = msg[:300] + "..."
	}
	return msg
}

// TransportError turns an error from sending a request or reading its answer
// into an [*Error]. parent is the caller's context (without the per-request
// timeout): when it is done the error is a cancellation, not a timeout of
// ours. timeout is the per-request timeout in force, for the message.
func TransportError(ep Endpoint, parent context.Context, timeout time.Duration, err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	out := &Error{Provider: ep.Provider, Err: err}
	var re *ReadError
	got := int64(0)
	if errors.As(err, &re) {
		got = re.Received
	}
	switch {
	case parent.Err() != nil:
		out.Kind = KindCanceled
		out.Message = "the model request was canceled"
		if errors.Is(parent.Err(), context.DeadlineExceeded) {
			out.Kind = KindTimeout
			out.Message = "the model request ran out of time (the caller's deadline passed)"
		}
		if !errors.Is(err, parent.Err()) {
			out.Err = errors.Join(parent.Err(), err)
		}
	case errors.Is(err, context.DeadlineExceeded) || isNetTimeout(err):
		out.Kind, out.Retryable = KindTimeout, true
		out.Message = fmt.Sprintf("no answer from %s within %s: the server is busy or the model is slow; try again or raise the timeout (--llm-timeout)", ep.addr(), timeout)
		if got > 0 {
			out.Message = fmt.Sprintf("%s stopped answering: %s of the answer had arrived when the time limit of %s ran out; try again, or raise the timeout (--llm-timeout)", ep.addr(), FormatBytes(got), timeout)
		}
	case isDialError(err):
		out.Kind = KindUnreachable
		out.Message = fmt.Sprintf("cannot reach the model server at %s: start the server or fix --base-url", ep.addr())
	case errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, io.EOF) || errors.Is(err, syscall.EPIPE) || errors.Is(err, net.ErrClosed) ||
		strings.Contains(err.Error(), "connection reset") || strings.Contains(err.Error(), "EOF"):
		out.Kind, out.Retryable = KindNetwork, true
		out.Message = fmt.Sprintf("the connection to %s broke during the request: try again", ep.addr())
		if got > 0 {
			out.Message = fmt.Sprintf("the connection to %s broke after %s of the answer had arrived: try again", ep.addr(), FormatBytes(got))
		}
	default:
		out.Kind = KindBadResponse
		out.Message = fmt.Sprintf("could not read the answer from %s: is it a %s-compatible server?", ep.addr(), ep.Provider)
	}
	return out
}

func isNetTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func isDialError(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var dns *net.DNSError
	return errors.As(err, &dns) || errors.Is(err, syscall.ECONNREFUSED)
}

// CheckAnswer reports an answer that must not be passed on silently: larger
// than the cap, cut off at the token limit, empty (no text and no tool
// calls), or not valid UTF-8. body, when not nil, watched the raw answer:
// decoders replace invalid bytes with U+FFFD, so only the raw bytes tell a
// broken answer from a correctly encoded U+FFFD, which is valid text.
// maxTokens is for the message.
func CheckAnswer(ep Endpoint, r Response, maxTokens int, body *AnswerBody) error {
	size := int64(len(r.Text))
	for _, tc := range r.ToolCalls {
		size += int64(len(tc.Arguments))
	}
	switch {
	case body != nil && size > body.Max():
		return AnswerTooLarge(ep, body.Max())
	case r.FinishReason == FinishLength:
		return &Error{Kind: KindTruncated, Provider: ep.Provider,
			Message: fmt.Sprintf("the answer was cut off at the token limit (max tokens %d): raise max tokens or ask for a shorter answer", maxTokens)}
	case strings.TrimSpace(r.Text) == "" && len(r.ToolCalls) == 0:
		return &Error{Kind: KindEmptyAnswer, Provider: ep.Provider,
			Message: fmt.Sprintf("model %q at %s returned an empty answer (finish reason %q): try again or try another model", ep.Model, ep.addr(), r.RawFinishReason)}
	case !utf8.ValidString(r.Text) || body != nil && body.InvalidUTF8():
		return &Error{Kind: KindInvalidUTF8, Provider: ep.Provider,
			Message: fmt.Sprintf("the answer from %s is not valid UTF-8: the server or model emitted broken text", ep.addr())}
	}
	return nil
}

// BrokenStream is the error for a stream that ended cleanly but without
// the end of the answer (a finish reason, message_stop or [DONE]), as when
// the model's process dies mid-answer. got is how much text had arrived.
func BrokenStream(ep Endpoint, got int64) *Error {
	msg := fmt.Sprintf("the answer from %s stopped before it was complete (the stream ended without a finish reason): the server or its model process may have crashed or restarted; try again", ep.addr())
	if got > 0 {
		msg = fmt.Sprintf("the answer from %s stopped after %s, before it was complete (the stream ended without a finish reason): the server or its model process may have crashed or restarted; try again", ep.addr(), FormatBytes(got))
	}
	return &Error{Kind: KindBroken, Provider: ep.Provider, Retryable: true, Message: msg}
}

func (ep Endpoint) addr() string {
	if ep.BaseURL != "" {
		return ep.BaseURL
	}
	return ep.Provider
}

func (ep Endpoint) keyVar() string {
	if ep.KeyVar != "" {
		return ep.KeyVar
	}
	return "the API key variable"
}

func (ep Endpoint) hint() string {
	if ep.ModelsHint == "" {
		return ""
	}
	return " (list them with " + ep.ModelsHint + ")"
}

// ErrorFromResponse passes res on unless it has an error status, which it
// turns into an *Error. Providers call it from SDK middleware, before the SDK
// tries to decode the body: servers other than the provider's own send error
// bodies the SDK cannot parse (a bare string, HTML from a proxy).
func ErrorFromResponse(ep Endpoint, res *http.Response, err error) (*http.Response, error) {
	if err != nil || res.StatusCode < 400 {
		return res, err
	}
	body, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
	_ = res.Body.Close()
	return nil, HTTPError(ep, res.StatusCode, res.Header, body)
}

// Refuses reports whether err is a 4xx/5xx refusal of the request (not
// auth, a rate limit or a missing model) whose detail mentions one of
// words: how a server says it does not take a feature such as tools.
func Refuses(err error, words ...string) bool {
	var e *Error
	if !errors.As(err, &e) || e.StatusCode < 400 {
		return false
	}
	switch e.Kind {
	case KindAuth, KindRateLimit, KindNotFound:
		return false
	}
	d := strings.ToLower(e.Detail)
	for _, w := range words {
		if strings.Contains(d, w) {
			return true
		}
	}
	return false
}
