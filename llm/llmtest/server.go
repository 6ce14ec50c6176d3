// Package llmtest has test doubles for code that talks to models: local
// HTTP servers that speak the OpenAI Chat Completions and Anthropic Messages
// wire protocols (plain JSON and SSE streaming) from a queue of scripted
// replies, and record what they were sent; a conformance suite that runs one
// set of scenarios against any llm.Provider backend; and an in-memory
// scripted Provider for tests that need no HTTP at all.
//
// Typical use from another package's test:
//
//	srv := llmtest.NewOpenAIServer(t, llmtest.Say("```python\nprint(1)\n```"))
//	cfg := llmtest.Config(llm.ProviderOpenAI, srv.BaseURL)
//	p, _ := providers.New(cfg, nil, nil)
//	resp, err := p.Chat(ctx, llm.Request{Messages: ...})
//	got := srv.Requests()[0].JSON["messages"]
package llmtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/codeagent/codeagent/llm"
)

// Reply is one scripted answer. The same Reply serves a plain or a
// streaming request: the server renders it in whichever form was asked for.
type Reply struct {
	// Status is the HTTP status; 0 means 200.
	Status int
	// Header is added to the answer, e.g. {"Retry-After": "2"}.
	Header map[string]string
	// Text is the answer text; it is written byte for byte, so invalid
	// UTF-8 reaches the client as it would from a broken server.
	Text string
	// Chunks, when set, are the streamed text fragments (their join should
	// equal Text); otherwise Text is cut into a few fragments.
	Chunks []string
	// ToolCalls the model makes; IDs are made up when empty.
	ToolCalls []llm.ToolCall
	// Finish is the finish reason: "" means stop, or tool_calls when there
	// are ToolCalls. llm.FinishLength renders as length / max_tokens.
	Finish llm.FinishReason
	// Usage is reported when non-nil; nil omits the usage block entirely.
	Usage *llm.Usage
	// Model is the model named in the answer; "" echoes the request's.
	Model string
	// Error, for Status >= 400, is the message in the provider's error body.
	Error string
	// Body, when set, is written verbatim instead of a rendered answer.
	Body string
	// Delay holds the answer back (ended early if the client goes away).
	Delay time.Duration
	// Hangup closes the connection with a TCP reset instead of answering.
	Hangup bool
	// Cut ends a stream cleanly after the text and tool calls but without
	// the end of the answer (no finish reason and no [DONE]; no
	// message_delta and message_stop), as Ollama does when its model
	// process dies mid-answer.
	Cut bool
	// Stall sends the start of the answer (a stream's text and tool calls,
	// or the first half of a JSON body) and then nothing more until the
	// client goes away.
	Stall bool
	// Repeat, when above 1, sends Text that many times over (in a JSON
	// body, or as that many stream chunks) without building it in memory,
	// for answers of any size.
	Repeat int
	// Extra fields merged into the top level of a JSON answer, to check
	// that clients ignore what they do not know.
	Extra map[string]any
	// Func, when set, makes the reply when its turn comes from the request
	// it answers (a model that reacts to what it was sent); the other
	// fields are ignored.
	Func func(req Request) Reply
}

// Call is a reply that calls tools, in order.
func Call(calls ...llm.ToolCall) Reply {
	return Reply{ToolCalls: calls, Usage: &llm.Usage{InputTokens: 10, OutputTokens: 5}}
}

// ToolCall is a call of the tool name with args encoded as its JSON
// arguments.
func ToolCall(name string, args any) llm.ToolCall {
	b, err := json.Marshal(args)
	if err != nil {
		panic(err)
	}
	return llm.ToolCall{Name: name, Arguments: b}
}

// Say is a 200 reply with text and a small usage block.
func Say(text string) Reply {
	return Reply{Text: text, Usage: &llm.Usage{InputTokens: 10, OutputTokens: 5}}
}

// Fail is an error reply with status and message.
func Fail(status int, message string) Reply { return Reply{Status: status, Error: message} }

// Request is what the server received.
type Request struct {
	Method string
	Path   string
	Header http.Header
	Body   []byte
	// JSON is Body decoded; nil when it was not a JSON object.
	JSON map[string]any
	// Stream reports "stream": true in the body.
	Stream bool

	done <-chan struct{} // the client went away
}

// wait blocks until the client goes away.
func (r Request) wait() {
	if r.done != nil {
		<-r.done
	}
}

// Model is the "model" field of the request.
func (r Request) Model() string { s, _ := r.JSON["model"].(string); return s }

// Text is all the text the request carries to the model, in order: the
// system prompt and the content of every message, tool results included,
// in either wire protocol (one piece a line); tool calls' arguments are
// left out.
func (r Request) Text() string {
	var b strings.Builder
	var walk func(key string, v any)
	walk = func(key string, v any) {
		switch x := v.(type) {
		case string:
			if key == "content" || key == "text" || key == "system" {
				b.WriteString(x + "\n")
			}
		case []any:
			for _, e := range x {
				walk(key, e)
			}
		case map[string]any:
			for _, k := range []string{"system", "text", "content"} {
				if e, ok := x[k]; ok {
					walk(k, e)
				}
			}
		}
	}
	walk("system", r.JSON["system"])
	walk("", r.JSON["messages"])
	return b.String()
}

// wire renders replies in one provider's protocol.
type wire interface {
	path() string // the one POST path served, e.g. /v1/chat/completions
	writeJSON(w http.ResponseWriter, req Request, r Reply)
	writeSSE(w http.ResponseWriter, req Request, r Reply)
	writeError(w http.ResponseWriter, r Reply)
}

// Server is a fake model server. Replies are served in order; a request
// beyond the script fails the test and gets a 500.
type Server struct {
	*httptest.Server
	// BaseURL is what to put in llm.Config.BaseURL.
	BaseURL string

	t     testing.TB
	wire  wire
	mu    sync.Mutex
	queue []Reply
	reqs  []Request
}

// NewOpenAIServer starts a fake OpenAI-compatible server serving
// POST /v1/chat/completions; BaseURL ends in /v1. It stops when the test ends.
func NewOpenAIServer(t testing.TB, replies ...Reply) *Server {
	return newServer(t, openaiWire{}, "/v1", replies)
}

// NewAnthropicServer starts a fake Anthropic server serving POST
// /v1/messages; BaseURL is the bare origin. It stops when the test ends.
func NewAnthropicServer(t testing.TB, replies ...Reply) *Server {
	return newServer(t, anthropicWire{}, "", replies)
}

func newServer(t testing.TB, w wire, suffix string, replies []Reply) *Server {
	t.Helper()
	s := &Server{t: t, wire: w, queue: append([]Reply(nil), replies...)}
	s.Server = httptest.NewServer(http.HandlerFunc(s.handle))
	s.BaseURL = s.Server.URL + suffix
	t.Cleanup(s.Close)
	return s
}

// Push appends replies to the script.
func (s *Server) Push(replies ...Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = append(s.queue, replies...)
}

// Requests returns a copy of the requests received so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// Remaining is the number of scripted replies not yet served.
func (s *Server) Remaining() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue)
}

func (s *Server) handle(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != s.wire.path() {
		http.NotFound(w, r) // a wrong base URL, as a real server answers it
		return
	}
	body, _ := io.ReadAll(r.Body)
	req := Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body, done: r.Context().Done()}
	if json.Unmarshal(body, &req.JSON) == nil {
		req.Stream, _ = req.JSON["stream"].(bool)
	}
	s.mu.Lock()
	s.reqs = append(s.reqs, req)
	if len(s.queue) == 0 {
		s.mu.Unlock()
		s.t.Errorf("llmtest: request %d to %s has no scripted reply", len(s.Requests()), r.URL.Path)
		http.Error(w, `{"error":{"message":"llmtest: no scripted reply left"}}`, http.StatusInternalServerError)
		return
	}
	reply := s.queue[0]
	s.queue = s.queue[1:]
	s.mu.Unlock()
	if reply.Func != nil {
		reply = reply.Func(req)
	}

	if reply.Delay > 0 {
		select {
		case <-time.After(reply.Delay):
		case <-r.Context().Done():
			return
		}
	}
	if reply.Hangup {
		hangup(w)
		return
	}
	for k, v := range reply.Header {
		w.Header().Set(k, v)
	}
	switch {
	case reply.Body != "":
		if w.Header().Get("Content-Type") == "" {
			w.Header().Set("Content-Type", "application/json")
		}
		w.WriteHeader(status(reply))
		io.WriteString(w, reply.Body)
	case status(reply) >= 400:
		s.wire.writeError(w, reply)
	case req.Stream:
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		s.wire.writeSSE(w, req, reply)
	case reply.Repeat > 1 || reply.Stall:
		writeLongJSON(w, s.wire, req, reply)
	default:
		s.wire.writeJSON(w, req, reply)
	}
}

// marker stands for the text in a rendered body, to be replaced on the way
// out; it encodes as itself.
const marker = "LLMTEST-TEXT-MARKER"

// writeLongJSON writes a JSON answer whose text is Repeat copies of Text,
// rendered piece by piece, or (Stall) the first half of the body and then
// nothing until the client goes away.
func writeLongJSON(w http.ResponseWriter, wire wire, req Request, r Reply) {
	text := r.Text
	r.Text = marker
	rec := httptest.NewRecorder()
	wire.writeJSON(rec, req, r)
	body := rec.Body.String()
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	enc, _ := raw(text).MarshalJSON()
	piece := string(enc[1 : len(enc)-1])
	head, tail, _ := strings.Cut(body, marker)
	if r.Stall {
		full := head + strings.Repeat(piece, max(1, r.Repeat)) + tail
		io.WriteString(w, full[:len(full)/2])
		flush(w)
		req.wait()
		return
	}
	io.WriteString(w, head)
	for i := 0; i < r.Repeat; i++ {
		if _, err := io.WriteString(w, piece); err != nil {
			return // the client went away
		}
	}
	io.WriteString(w, tail)
}

func flush(w http.ResponseWriter) {
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

// hangup resets the connection without an answer.
func hangup(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic("llmtest: response writer cannot hijack")
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0) // close with RST: "connection reset by peer"
	}
	_ = conn.Close()
}

func status(r Reply) int {
	if r.Status == 0 {
		return http.StatusOK
	}
	return r.Status
}

func model(req Request, r Reply) string {
	if r.Model != "" {
		return r.Model
	}
	return req.Model()
}

func chunks(r Reply) []string {
	if r.Repeat > 1 {
		out := make([]string, r.Repeat)
		for i := range out {
			out[i] = r.Text
		}
		return out
	}
	if len(r.Chunks) > 0 {
		return r.Chunks
	}
	if r.Text == "" {
		return nil
	}
	var out []string
	t := r.Text
	n := max(1, len(t)/3)
	for len(t) > n {
		out = append(out, t[:n])
		t = t[n:]
	}
	return append(out, t)
}

func callID(prefix string, i int, tc llm.ToolCall) string {
	if tc.ID != "" {
		return tc.ID
	}
	return fmt.Sprintf("%s_%d", prefix, i+1)
}

func argsOf(tc llm.ToolCall) string {
	if len(tc.Arguments) == 0 {
		return "{}"
	}
	return string(tc.Arguments)
}

// raw is a JSON string written byte for byte: only quotes, backslashes and
// control characters are escaped, so invalid UTF-8 survives encoding.
type raw string

func (s raw) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c == '\n':
			b.WriteString(`\n`)
		case c < 0x20:
			fmt.Fprintf(&b, `\u%04x`, c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.Bytes(), nil
}

func writeJSONBody(w http.ResponseWriter, code int, v any) {
	b, err := marshal(v)
	if err != nil {
		panic(err)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	w.Write(b)
}

// marshal encodes without HTML escaping and keeps raw strings raw.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// sse writes one server-sent event and flushes it. It reports false when
// the write failed (the client went away).
func sse(w http.ResponseWriter, event string, data any) bool {
	var b []byte
	switch d := data.(type) {
	case string:
		b = []byte(d)
	default:
		var err error
		if b, err = marshal(d); err != nil {
			panic(err)
		}
	}
	var out strings.Builder
	if event != "" {
		out.WriteString("event: " + event + "\n")
	}
	out.WriteString("data: ")
	out.Write(b)
	out.WriteString("\n\n")
	_, err := io.WriteString(w, out.String())
	flush(w)
	return err == nil
}
