package llmtest

import (
	"encoding/json"
	"net/http"

	"github.com/codeagent/codeagent/llm"
)

// anthropicWire speaks the Anthropic Messages API: a message object, or the
// SSE events message_start, content_block_start, content_block_delta,
// content_block_stop, message_delta and message_stop (with a ping).
type anthropicWire struct{}

func (anthropicWire) path() string { return "/v1/messages" }

func antStop(r Reply) string {
	switch {
	case r.Finish == llm.FinishLength:
		return "max_tokens"
	case r.Finish == llm.FinishOther:
		return "refusal"
	case r.Finish == llm.FinishToolCalls || (r.Finish == "" && len(r.ToolCalls) > 0):
		return "tool_use"
	}
	return "end_turn"
}

func antUsage(u *llm.Usage) map[string]any {
	return map[string]any{
		"input_tokens": u.InputTokens, "output_tokens": u.OutputTokens,
		"cache_read_input_tokens": u.CacheReadTokens, "cache_creation_input_tokens": u.CacheWriteTokens,
	}
}

// input is a call's arguments as Anthropic's input object; arguments that
// are not JSON (a broken model) travel as a JSON string.
func input(tc llm.ToolCall) json.RawMessage {
	if a := argsOf(tc); json.Valid([]byte(a)) {
		return json.RawMessage(a)
	}
	b, _ := json.Marshal(argsOf(tc))
	return b
}

func (anthropicWire) writeJSON(w http.ResponseWriter, req Request, r Reply) {
	content := []any{}
	if r.Text != "" || len(r.ToolCalls) == 0 {
		content = append(content, map[string]any{"type": "text", "text": raw(r.Text)})
	}
	for i, tc := range r.ToolCalls {
		content = append(content, map[string]any{"type": "tool_use", "id": callID("toolu", i, tc), "name": tc.Name, "input": input(tc)})
	}
	body := map[string]any{
		"id": "msg_llmtest", "type": "message", "role": "assistant", "model": model(req, r),
		"content": content, "stop_reason": antStop(r), "stop_sequence": nil,
	}
	if r.Usage != nil {
		body["usage"] = antUsage(r.Usage)
	}
	for k, v := range r.Extra {
		body[k] = v
	}
	writeJSONBody(w, status(r), body)
}

func (anthropicWire) writeSSE(w http.ResponseWriter, req Request, r Reply) {
	w.WriteHeader(status(r))
	start := map[string]any{
		"id": "msg_llmtest", "type": "message", "role": "assistant", "model": model(req, r),
		"content": []any{}, "stop_reason": nil, "stop_sequence": nil,
	}
	if r.Usage != nil {
		start["usage"] = map[string]any{"input_tokens": r.Usage.InputTokens, "output_tokens": 1,
			"cache_read_input_tokens": r.Usage.CacheReadTokens, "cache_creation_input_tokens": r.Usage.CacheWriteTokens}
	}
	sse(w, "message_start", map[string]any{"type": "message_start", "message": start})
	idx := 0
	if parts := chunks(r); len(parts) > 0 {
		sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": idx, "content_block": map[string]any{"type": "text", "text": ""}})
		sse(w, "ping", map[string]any{"type": "ping"})
		for _, c := range parts {
			if !sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": idx, "delta": map[string]any{"type": "text_delta", "text": raw(c)}}) {
				return // the client went away
			}
		}
		sse(w, "content_block_stop", map[string]any{"type": "content_block_stop", "index": idx})
		idx++
	}
	for i, tc := range r.ToolCalls {
		sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": idx,
			"content_block": map[string]any{"type": "tool_use", "id": callID("toolu", i, tc), "name": tc.Name, "input": map[string]any{}}})
		args := argsOf(tc)
		half := len(args) / 2
		for _, part := range []string{"", args[:half], args[half:]} {
			sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": idx,
				"delta": map[string]any{"type": "input_json_delta", "partial_json": part}})
		}
		sse(w, "content_block_stop", map[string]any{"type": "content_block_stop", "index": idx})
		idx++
	}
	if r.Stall {
		req.wait()
		return
	}
	if r.Cut {
		return
	}
	delta := map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": antStop(r), "stop_sequence": nil}}
	if r.Usage != nil {
		delta["usage"] = map[string]any{"output_tokens": r.Usage.OutputTokens}
	}
	sse(w, "message_delta", delta)
	sse(w, "message_stop", map[string]any{"type": "message_stop"})
}

func (anthropicWire) writeError(w http.ResponseWriter, r Reply) {
	typ := "invalid_request_error"
	switch status(r) {
	case http.StatusUnauthorized:
		typ = "authentication_error"
	case http.StatusForbidden:
		typ = "permission_error"
	case http.StatusNotFound:
		typ = "not_found_error"
	case http.StatusTooManyRequests:
		typ = "rate_limit_error"
	case 529:
		typ = "overloaded_error"
	default:
		if status(r) >= 500 {
			typ = "api_error"
		}
	}
	writeJSONBody(w, status(r), map[string]any{
		"type": "error", "error": map[string]any{"type": typ, "message": r.Error},
		"request_id": "req_llmtest",
	})
}
