package llmtest

import (
	"net/http"

	"github.com/codeagent/codeagent/llm"
)

// openaiWire speaks OpenAI Chat Completions: a chat.completion object, or
// chat.completion.chunk SSE "data:" lines ending in "data: [DONE]".
type openaiWire struct{}

func (openaiWire) path() string { return "/v1/chat/completions" }

func oaiFinish(r Reply) string {
	switch {
	case r.Finish == llm.FinishLength:
		return "length"
	case r.Finish == llm.FinishOther:
		return "content_filter"
	case r.Finish == llm.FinishToolCalls || (r.Finish == "" && len(r.ToolCalls) > 0):
		return "tool_calls"
	}
	return "stop"
}

func oaiUsage(u *llm.Usage) map[string]any {
	return map[string]any{
		"prompt_tokens":         u.InputTokens,
		"completion_tokens":     u.OutputTokens,
		"total_tokens":          u.InputTokens + u.OutputTokens,
		"prompt_tokens_details": map[string]any{"cached_tokens": u.CacheReadTokens},
	}
}

func (openaiWire) writeJSON(w http.ResponseWriter, req Request, r Reply) {
	msg := map[string]any{"role": "assistant", "content": raw(r.Text), "refusal": nil}
	if r.Text == "" && len(r.ToolCalls) > 0 {
		msg["content"] = nil
	}
	if len(r.ToolCalls) > 0 {
		var calls []any
		for i, tc := range r.ToolCalls {
			calls = append(calls, map[string]any{
				"id": callID("call", i, tc), "type": "function",
				"function": map[string]any{"name": tc.Name, "arguments": argsOf(tc)},
			})
		}
		msg["tool_calls"] = calls
	}
	body := map[string]any{
		"id": "chatcmpl-llmtest", "object": "chat.completion", "created": 1700000000,
		"model": model(req, r), "system_fingerprint": "fp_llmtest",
		"choices": []any{map[string]any{"index": 0, "message": msg, "logprobs": nil, "finish_reason": oaiFinish(r)}},
	}
	if r.Usage != nil {
		body["usage"] = oaiUsage(r.Usage)
	}
	for k, v := range r.Extra {
		body[k] = v
	}
	writeJSONBody(w, status(r), body)
}

func (openaiWire) writeSSE(w http.ResponseWriter, req Request, r Reply) {
	w.WriteHeader(status(r))
	chunk := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{
			"id": "chatcmpl-llmtest", "object": "chat.completion.chunk", "created": 1700000000,
			"model": model(req, r), "system_fingerprint": "fp_llmtest",
			"choices": []any{map[string]any{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": finish}},
		}
	}
	sse(w, "", chunk(map[string]any{"role": "assistant", "content": ""}, nil))
	for _, c := range chunks(r) {
		if !sse(w, "", chunk(map[string]any{"content": raw(c)}, nil)) {
			return // the client went away
		}
	}
	for i, tc := range r.ToolCalls {
		args := argsOf(tc)
		half := len(args) / 2
		sse(w, "", chunk(map[string]any{"tool_calls": []any{map[string]any{
			"index": i, "id": callID("call", i, tc), "type": "function",
			"function": map[string]any{"name": tc.Name, "arguments": ""},
		}}}, nil))
		for _, part := range []string{args[:half], args[half:]} {
			sse(w, "", chunk(map[string]any{"tool_calls": []any{map[string]any{
				"index": i, "function": map[string]any{"arguments": part},
			}}}, nil))
		}
	}
	if r.Stall {
		req.wait()
		return
	}
	if r.Cut {
		return
	}
	sse(w, "", chunk(map[string]any{}, oaiFinish(r)))
	if opts, _ := req.JSON["stream_options"].(map[string]any); r.Usage != nil && opts["include_usage"] == true {
		sse(w, "", map[string]any{
			"id": "chatcmpl-llmtest", "object": "chat.completion.chunk", "created": 1700000000,
			"model": model(req, r), "choices": []any{}, "usage": oaiUsage(r.Usage),
		})
	}
	sse(w, "", "[DONE]")
}

func (openaiWire) writeError(w http.ResponseWriter, r Reply) {
	code := any(nil)
	typ := "invalid_request_error"
	switch status(r) {
	case http.StatusUnauthorized:
		code = "invalid_api_key"
	case http.StatusNotFound:
		code = "model_not_found"
	case http.StatusTooManyRequests:
		typ, code = "requests", "rate_limit_exceeded"
	}
	if status(r) >= 500 {
		typ = "server_error"
	}
	writeJSONBody(w, status(r), map[string]any{
		"error": map[string]any{"message": r.Error, "type": typ, "param": nil, "code": code},
	})
}
