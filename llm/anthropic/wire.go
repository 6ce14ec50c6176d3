package anthropic

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/codeagent/codeagent/llm"
)

// params translates req into the SDK's request.
func (p *Provider) params(req llm.Request) (sdk.MessageNewParams, error) {
	model := req.Model
	if model == "" {
		model = p.cfg.Model
	}
	maxTok := req.MaxTokens
	if maxTok == 0 {
		maxTok = p.cfg.MaxTokens
	}
	if maxTok <= 0 {
		maxTok = 4096 // the API requires max_tokens
	}
	params := sdk.MessageNewParams{Model: sdk.Model(model), MaxTokens: int64(maxTok)}
	system := req.System
	if req.JSON {
		system = strings.TrimSpace(system + "\n\nAnswer with a single JSON value and nothing else: no prose, no code fences.")
	}
	if system != "" {
		params.System = []sdk.TextBlockParam{{Text: system}}
	}
	for i, m := range req.Messages {
		role, blocks, err := toBlocks(m)
		if err != nil {
			return params, fmt.Errorf("anthropic: message %d: %w", i, err)
		}
		if n := len(params.Messages); n > 0 && params.Messages[n-1].Role == role {
			params.Messages[n-1].Content = append(params.Messages[n-1].Content, blocks...)
			continue
		}
		params.Messages = append(params.Messages, sdk.MessageParam{Role: role, Content: blocks})
	}
	for _, t := range req.Tools {
		schema := sdk.ToolInputSchemaParam{}
		if len(t.Parameters) > 0 {
			var obj map[string]any
			if err := json.Unmarshal(t.Parameters, &obj); err != nil {
				return params, fmt.Errorf("anthropic: tool %s: parameters are not a JSON object: %w", t.Name, err)
			}
			schema.Properties = obj["properties"]
			if req, ok := obj["required"].([]any); ok {
				for _, r := range req {
					if s, ok := r.(string); ok {
						schema.Required = append(schema.Required, s)
					}
				}
			}
			delete(obj, "properties")
			delete(obj, "required")
			delete(obj, "type")
			if len(obj) > 0 {
				schema.ExtraFields = obj
			}
		}
		tp := sdk.ToolParam{Name: t.Name, InputSchema: schema}
		if t.Description != "" {
			tp.Description = sdk.String(t.Description)
		}
		params.Tools = append(params.Tools, sdk.ToolUnionParam{OfTool: &tp})
	}
	if req.Temperature != nil {
		params.Temperature = sdk.Float(*req.Temperature)
	}
	return params, nil
}

func toBlocks(m llm.Message) (sdk.MessageParamRole, []sdk.ContentBlockParamUnion, error) {
	switch m.Role {
	case llm.RoleUser:
		return sdk.MessageParamRoleUser, []sdk.ContentBlockParamUnion{sdk.NewTextBlock(m.Content)}, nil
	case llm.RoleTool:
		return sdk.MessageParamRoleUser, []sdk.ContentBlockParamUnion{sdk.NewToolResultBlock(m.ToolCallID, m.Content, m.IsError)}, nil
	case llm.RoleAssistant:
		var blocks []sdk.ContentBlockParamUnion
		if m.Content != "" {
			blocks = append(blocks, sdk.NewTextBlock(m.Content))
		}
		for _, tc := range m.ToolCalls {
			input := tc.Arguments
			if len(input) == 0 || !json.Valid(input) {
				input = json.RawMessage("{}")
			}
			blocks = append(blocks, sdk.NewToolUseBlock(tc.ID, input, tc.Name))
		}
		if len(blocks) == 0 {
			blocks = append(blocks, sdk.NewTextBlock(""))
		}
		return sdk.MessageParamRoleAssistant, blocks, nil
	}
	return "", nil, fmt.Errorf("unknown role %q", m.Role)
}

// fromMessage translates a non-streaming answer.
func fromMessage(m *sdk.Message, requested string) llm.Response {
	r := llm.Response{Model: string(m.Model), Usage: usage(m.Usage.InputTokens, m.Usage.OutputTokens, m.Usage.CacheReadInputTokens, m.Usage.CacheCreationInputTokens)}
	if r.Model == "" {
		r.Model = requested
	}
	var text strings.Builder
	for _, b := range m.Content {
		switch b.Type {
		case "text":
			text.WriteString(b.Text)
		case "tool_use":
			in := json.RawMessage(b.Input)
			if len(in) == 0 || string(in) == "null" {
				in = json.RawMessage("{}")
			}
			r.ToolCalls = append(r.ToolCalls, llm.ToolCall{ID: b.ID, Name: b.Name, Arguments: in})
		}
	}
	r.Text = text.String()
	r.RawFinishReason = string(m.StopReason)
	r.FinishReason = finish(r.RawFinishReason)
	return r
}

// stream reads the SSE events message_start, content_block_start,
// content_block_delta, message_delta and message_stop. It stops reading at
// the answer size cap, and a stream that ends without message_stop is
// broken, not a complete answer.
func (p *Provider) stream(ctx context.Context, params sdk.MessageNewParams, ep llm.Endpoint, body *llm.AnswerBody, onDelta func(string)) (llm.Response, error) {
	s := p.client.Messages.NewStreaming(ctx, params, p.middleware(ep, body))
	defer s.Close()
	r := llm.Response{Model: string(params.Model)}
	var text strings.Builder
	type partial struct {
		id, name string
		input    strings.Builder
	}
	calls := map[int64]*partial{}
	var in, out, cacheRead, cacheWrite int64
	size, stopped := int64(0), false
	var tooLarge error
	for tooLarge == nil && s.Next() {
		ev := s.Current()
		size += int64(len(ev.ContentBlock.Text) + len(ev.Delta.Text) + len(ev.Delta.PartialJSON))
		if size > body.Max() {
			tooLarge = llm.AnswerTooLarge(ep, body.Max())
			break
		}
		switch ev.Type {
		case "message_start":
			if ev.Message.Model != "" {
				r.Model = string(ev.Message.Model)
			}
			u := ev.Message.Usage
			in, out, cacheRead, cacheWrite = u.InputTokens, u.OutputTokens, u.CacheReadInputTokens, u.CacheCreationInputTokens
		case "content_block_start":
			if ev.ContentBlock.Type == "tool_use" {
				calls[ev.Index] = &partial{id: ev.ContentBlock.ID, name: ev.ContentBlock.Name}
			} else if ev.ContentBlock.Text != "" {
				text.WriteString(ev.ContentBlock.Text)
				if onDelta != nil {
					onDelta(ev.ContentBlock.Text)
				}
			}
		case "content_block_delta":
			switch ev.Delta.Type {
			case "text_delta":
				text.WriteString(ev.Delta.Text)
				if onDelta != nil && ev.Delta.Text != "" {
					onDelta(ev.Delta.Text)
				}
			case "input_json_delta":
				if pc := calls[ev.Index]; pc != nil {
					pc.input.WriteString(ev.Delta.PartialJSON)
				}
			}
		case "message_delta":
			if ev.Delta.StopReason != "" {
				r.RawFinishReason = string(ev.Delta.StopReason)
			}
			// message_delta usage is cumulative.
			if ev.Usage.OutputTokens > 0 {
				out = ev.Usage.OutputTokens
			}
			if ev.Usage.InputTokens > 0 {
				in = ev.Usage.InputTokens
			}
		case "message_stop":
			stopped = true
		}
	}
	r.Text = text.String()
	r.Usage = usage(in, out, cacheRead, cacheWrite)
	idx := make([]int64, 0, len(calls))
	for i := range calls {
		idx = append(idx, i)
	}
	sort.Slice(idx, func(a, b int) bool { return idx[a] < idx[b] })
	for _, i := range idx {
		pc := calls[i]
		input := json.RawMessage(pc.input.String())
		if len(input) == 0 {
			input = json.RawMessage("{}")
		} else if !json.Valid(input) {
			input, _ = json.Marshal(pc.input.String())
		}
		r.ToolCalls = append(r.ToolCalls, llm.ToolCall{ID: pc.id, Name: pc.name, Arguments: input})
	}
	r.FinishReason = finish(r.RawFinishReason)
	switch err := s.Err(); {
	case tooLarge != nil:
		return r, tooLarge
	case err != nil:
		return r, llm.WithReceived(err, int64(text.Len()))
	case !stopped:
		return r, llm.BrokenStream(ep, int64(text.Len()))
	}
	return r, nil
}

func finish(raw string) llm.FinishReason {
	switch raw {
	case "end_turn", "stop_sequence", "":
		return llm.FinishStop
	case "max_tokens", "model_context_window_exceeded":
		return llm.FinishLength
	case "tool_use":
		return llm.FinishToolCalls
	}
	return llm.FinishOther
}

func usage(in, out, cacheRead, cacheWrite int64) llm.Usage {
	return llm.Usage{InputTokens: in, OutputTokens: out, CacheReadTokens: cacheRead, CacheWriteTokens: cacheWrite}
}
