package openai

import (
	"context"
	"encoding/json"
	"sort"
	"strings"

	"github.com/codeagent/codeagent/llm"
	oai "github.com/openai/openai-go/v3"
)

// fromCompletion translates a non-streaming answer. Only the first choice
// counts: codeagent never asks for more than one.
func fromCompletion(c *oai.ChatCompletion, requested string) llm.Response {
	r := llm.Response{Model: c.Model, Usage: usage(c.Usage)}
	if r.Model == "" {
		r.Model = requested
	}
	if len(c.Choices) == 0 {
		return r
	}
	ch := c.Choices[0]
	r.Text = ch.Message.Content
	if r.Text == "" && ch.Message.Refusal != "" {
		r.Text = ch.Message.Refusal
		r.Notes = append(r.Notes, "the model refused: "+ch.Message.Refusal)
	}
	for _, tc := range ch.Message.ToolCalls {
		if tc.Function.Name == "" {
			continue // custom (non-function) tools are never sent
		}
		r.ToolCalls = append(r.ToolCalls, llm.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: args(tc.Function.Arguments)})
	}
	r.RawFinishReason = ch.FinishReason
	r.FinishReason = finish(ch.FinishReason, len(r.ToolCalls) > 0)
	return r
}

// stream reads SSE chunks, passing text on as it comes and assembling tool
// calls from their fragments. It stops reading at the answer size cap, and
// a stream that ends without a finish reason or [DONE] is broken, not a
// complete answer.
func (p *Provider) stream(ctx context.Context, params oai.ChatCompletionNewParams, ep llm.Endpoint, body *llm.AnswerBody, onDelta func(string)) (llm.Response, error) {
	s := p.svc.NewStreaming(ctx, params, p.middleware(ep, body))
	defer s.Close()
	r := llm.Response{Model: string(params.Model)}
	var text strings.Builder
	type partial struct {
		id, name string
		args     strings.Builder
	}
	calls := map[int64]*partial{}
	size, finished := int64(0), false
	var tooLarge error
	for tooLarge == nil && s.Next() {
		ch := s.Current()
		if ch.Model != "" {
			r.Model = ch.Model
		}
		if u := usage(ch.Usage); !u.IsZero() {
			r.Usage = u
		}
		for _, c := range ch.Choices {
			if c.Index != 0 {
				continue
			}
			size += int64(len(c.Delta.Content))
			for _, tc := range c.Delta.ToolCalls {
				size += int64(len(tc.Function.Arguments))
			}
			if size > body.Max() {
				tooLarge = llm.AnswerTooLarge(ep, body.Max())
				break
			}
			if d := c.Delta.Content; d != "" {
				text.WriteString(d)
				if onDelta != nil {
					onDelta(d)
				}
			}
			for _, tc := range c.Delta.ToolCalls {
				pc := calls[tc.Index]
				if pc == nil {
					pc = &partial{}
					calls[tc.Index] = pc
				}
				if tc.ID != "" {
					pc.id = tc.ID
				}
				if tc.Function.Name != "" && pc.name == "" {
					pc.name = tc.Function.Name
				}
				pc.args.WriteString(tc.Function.Arguments)
			}
			if c.FinishReason != "" {
				r.RawFinishReason, finished = c.FinishReason, true
			}
		}
	}
	r.Text = text.String()
	idx := make([]int64, 0, len(calls))
	for i := range calls {
		idx = append(idx, i)
	}
	sort.Slice(idx, func(a, b int) bool { return idx[a] < idx[b] })
	for _, i := range idx {
		pc := calls[i]
		r.ToolCalls = append(r.ToolCalls, llm.ToolCall{ID: pc.id, Name: pc.name, Arguments: args(pc.args.String())})
	}
	r.FinishReason = finish(r.RawFinishReason, len(r.ToolCalls) > 0)
	switch err := s.Err(); {
	case tooLarge != nil:
		return r, tooLarge
	case err != nil:
		return r, llm.WithReceived(err, int64(text.Len()))
	case !finished && !body.Done():
		return r, llm.BrokenStream(ep, int64(text.Len()))
	}
	return r, nil
}

// finish normalises finish_reason. Ollama says "stop" even when it calls
// tools, so tool calls win; a missing reason counts as a natural stop.
func finish(raw string, hasCalls bool) llm.FinishReason {
	switch raw {
	case "length":
		return llm.FinishLength
	case "tool_calls", "function_call":
		return llm.FinishToolCalls
	case "stop", "", "eos", "end_turn":
		if hasCalls {
			return llm.FinishToolCalls
		}
		return llm.FinishStop
	}
	return llm.FinishOther
}

// args keeps valid JSON arguments as they are; anything else (some local
// models emit broken JSON) is passed on as a JSON string so that it stays
// valid JSON for the caller to reject.
func args(s string) json.RawMessage {
	if strings.TrimSpace(s) == "" {
		return json.RawMessage("{}")
	}
	if json.Valid([]byte(s)) {
		return json.RawMessage(s)
	}
	b, _ := json.Marshal(s)
	return b
}

func usage(u oai.CompletionUsage) llm.Usage {
	return llm.Usage{
		InputTokens:     u.PromptTokens,
		OutputTokens:    u.CompletionTokens,
		CacheReadTokens: u.PromptTokensDetails.CachedTokens,
	}
}
