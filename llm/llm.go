// Package llm is codeagent's provider-neutral view of a chat model.
//
// One small interface, [Provider], hides the wire protocol of each backend
// (OpenAI-compatible servers in llm/openai, Anthropic in llm/anthropic).
// Cross-cutting concerns wrap it as decorators: [Retry] for backoff and
// [Metered] for token and cost accounting. Backends turn every failure into a
// typed [*Error] whose message says what the user should do.
//
// The package holds no global state: configuration comes in as a plain
// [Config] and logs go to an injected *slog.Logger.
package llm

import (
	"context"
	"encoding/json"
)

// Provider sends one chat request to a model.
//
// Contract, for every implementation:
//   - ctx comes first and cancels the request; a canceled ctx yields an
//     [*Error] of kind [KindCanceled] that also matches context.Canceled
//     with errors.Is.
//   - Every error is (or wraps) an [*Error], so callers can branch on Kind and
//     Retryable with errors.As.
//   - An answer that is empty, cut off at the token limit or not valid UTF-8
//     is returned together with an error of kind [KindEmptyAnswer],
//     [KindTruncated] or [KindInvalidUTF8]; the Response still carries what
//     arrived (partial text, usage) so it can be shown or billed.
//   - Stream behaves like Chat but calls onDelta with each text fragment as it
//     arrives, in order, from the calling goroutine; the returned Response
//     holds the whole text. onDelta may be nil.
//   - Implementations are safe for concurrent use.
type Provider interface {
	Chat(ctx context.Context, req Request) (Response, error)
	Stream(ctx context.Context, req Request, onDelta func(text string)) (Response, error)
}

// Role is who wrote a message.
type Role string

// Message roles. The system prompt is not a message: see Request.System.
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	// RoleTool carries the result of a tool call back to the model; set
	// Message.ToolCallID to the call it answers.
	RoleTool Role = "tool"
)

// Message is one turn of the conversation.
type Message struct {
	Role    Role
	Content string
	// ToolCalls are the calls an assistant message made (replayed history).
	ToolCalls []ToolCall
	// ToolCallID names the call a RoleTool message answers.
	ToolCallID string
	// ToolName is the called tool's name, for backends that want it.
	ToolName string
	// IsError marks a RoleTool result that reports a failed or refused
	// call (Anthropic's is_error; OpenAI has no such flag).
	IsError bool
}

// Tool is a function the model may call.
type Tool struct {
	Name        string
	Description string
	// Parameters is a JSON Schema object describing the arguments; nil means
	// no arguments.
	Parameters json.RawMessage
}

// ToolCall is the model's request to run a tool.
type ToolCall struct {
	ID        string
	Name      string
	Arguments json.RawMessage // a JSON object, as the model produced it
}

// Request is one chat request.
type Request struct {
	// Model overrides the provider's configured model when non-empty.
	Model    string
	System   string
	Messages []Message
	// Tools the model may call; backends without tool support get the
	// request again without tools and say so in Response.Notes.
	Tools []Tool
	// JSON asks for an answer that is a single JSON value.
	JSON bool
	// Temperature is sent only when non-nil: some models reject it.
	Temperature *float64
	// MaxTokens caps the answer; 0 means the provider's configured default.
	MaxTokens int
}

// Temp returns a pointer to t, for Request.Temperature.
func Temp(t float64) *float64 { return &t }

// FinishReason says why the model stopped.
type FinishReason string

// Finish reasons, normalised across backends.
const (
	FinishStop      FinishReason = "stop"       // natural end of the answer
	FinishLength    FinishReason = "length"     // hit the token limit
	FinishToolCalls FinishReason = "tool_calls" // wants tools run
	FinishOther     FinishReason = "other"      // content filter, refusal, unknown
)

// Response is the model's answer.
type Response struct {
	Text         string
	ToolCalls    []ToolCall
	FinishReason FinishReason
	// RawFinishReason is the backend's own word, for logs.
	RawFinishReason string
	Usage           Usage
	// Model is the model that answered, as the server reported it (or as
	// requested when the server does not say).
	Model string
	// Notes tell about degraded service, e.g. tools dropped because the
	// server does not support them. Show them to the user.
	Notes []string
	// ToolsDropped says the server refused the request's tools and it was
	// answered without them (Notes says so too): the endpoint does not
	// take tool definitions.
	ToolsDropped bool
}
