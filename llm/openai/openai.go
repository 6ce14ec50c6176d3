// Package openai is the llm.Provider for OpenAI's Chat Completions API and
// every server that speaks it: Ollama, vLLM, llama.cpp's server, LM Studio
// and hosted gateways. It uses the official SDK with its retries off (the
// llm.Retry decorator is the one retry policy) and keeps the SDK's wire
// types inside this package.
//
// Compatibility rules, for servers that are not OpenAI:
//   - unknown fields in answers are ignored and a missing usage block counts
//     as zero tokens;
//   - a server that refuses the request because of tools (or of the JSON
//     response format) gets it once more without them, and the Response
//     says so in Notes;
//   - max_completion_tokens is sent to api.openai.com, max_tokens to
//     everyone else (local servers know only the older name).
package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"

	"github.com/codeagent/codeagent/llm"
	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/shared"
)

// Provider talks to one OpenAI-compatible endpoint.
type Provider struct {
	cfg    llm.Config
	svc    oai.ChatCompletionService
	log    *slog.Logger
	hosted bool // api.openai.com itself
}

var _ llm.Provider = (*Provider)(nil)

// New returns a Provider for cfg (which must validate). logger may be nil.
// Without an API key (a local server) no Authorization header is sent.
func New(cfg llm.Config, logger *slog.Logger) (*Provider, error) {
	if cfg.Provider == "" {
		cfg.Provider = llm.ProviderOpenAI
	}
	if cfg.KeyVar == "" {
		cfg.KeyVar = llm.EnvOpenAIKey
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	opts := []option.RequestOption{
		option.WithBaseURL(cfg.BaseURL),
		option.WithHTTPClient(&http.Client{}),
		option.WithMaxRetries(0),
	}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	}
	u, _ := url.Parse(cfg.BaseURL)
	return &Provider{
		cfg: cfg,
		// The service, not oai.NewClient: NewClient would read OPENAI_*
		// variables behind our back; the Config is the only source.
		svc:    oai.NewChatCompletionService(opts...),
		log:    logger,
		hosted: u != nil && strings.EqualFold(u.Hostname(), "api.openai.com"),
	}, nil
}

// Chat implements llm.Provider.
func (p *Provider) Chat(ctx context.Context, req llm.Request) (llm.Response, error) {
	return p.run(ctx, req, func(ctx context.Context, params oai.ChatCompletionNewParams, ep llm.Endpoint, body *llm.AnswerBody) (llm.Response, error) {
		c, err := p.svc.New(ctx, params, p.middleware(ep, body))
		if err != nil {
			return llm.Response{}, err
		}
		return fromCompletion(c, params.Model), nil
	}, nil)
}

// Stream implements llm.Provider.
func (p *Provider) Stream(ctx context.Context, req llm.Request, onDelta func(string)) (llm.Response, error) {
	return p.run(ctx, req, func(ctx context.Context, params oai.ChatCompletionNewParams, ep llm.Endpoint, body *llm.AnswerBody) (llm.Response, error) {
		params.StreamOptions = oai.ChatCompletionStreamOptionsParam{IncludeUsage: oai.Bool(true)}
		return p.stream(ctx, params, ep, body, onDelta)
	}, onDelta)
}

// sendFunc sends one request; body watches its answer.
type sendFunc func(ctx context.Context, params oai.ChatCompletionNewParams, ep llm.Endpoint, body *llm.AnswerBody) (llm.Response, error)

// run sends req, dropping tools or the JSON format once each if the server
// refuses them, and checks the answer.
func (p *Provider) run(parent context.Context, req llm.Request, send sendFunc, onDelta func(string)) (llm.Response, error) {
	ep := p.endpoint(req)
	useTools, useJSON := len(req.Tools) > 0, req.JSON
	var notes []string
	dropped := false
	for {
		params, err := p.params(req, useTools, useJSON)
		if err != nil {
			return llm.Response{}, err
		}
		ctx, cancel := p.withTimeout(parent)
		body := llm.NewAnswerBody(ep, p.cfg.AnswerCap())
		resp, err := send(ctx, params, ep, body)
		cancel()
		if err != nil {
			err = p.classify(ep, parent, body.Annotate(err))
			if useTools && llm.Refuses(err, "tool", "function") {
				p.log.Warn("llm/openai: server refused tools; retrying without", "base_url", p.cfg.BaseURL, "err", err)
				notes = append(notes, fmt.Sprintf("%s did not accept tool definitions, so the request was sent without tools", p.cfg.BaseURL))
				useTools, dropped = false, true
				continue
			}
			if useJSON && llm.Refuses(err, "response_format", "json") {
				p.log.Warn("llm/openai: server refused JSON mode; retrying without", "base_url", p.cfg.BaseURL, "err", err)
				notes = append(notes, fmt.Sprintf("%s did not accept the JSON response format, so JSON was asked for in the prompt only", p.cfg.BaseURL))
				useJSON = false
				continue
			}
			resp.Notes, resp.ToolsDropped = append(notes, resp.Notes...), dropped
			return resp, err
		}
		resp.Notes, resp.ToolsDropped = append(notes, resp.Notes...), dropped
		maxTok := req.MaxTokens
		if maxTok == 0 {
			maxTok = p.cfg.MaxTokens
		}
		return resp, llm.CheckAnswer(ep, resp, maxTok, body)
	}
}

func (p *Provider) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if p.cfg.Timeout > 0 {
		return context.WithTimeout(ctx, p.cfg.Timeout)
	}
	return context.WithCancel(ctx)
}

func (p *Provider) endpoint(req llm.Request) llm.Endpoint {
	return p.cfg.EndpointFor(req.Model)
}

// middleware turns any HTTP error status into an *llm.Error before the SDK
// tries to decode the body (servers other than OpenAI send error bodies
// the SDK cannot parse: a bare string, HTML), and has body watch the
// answer (size cap, raw UTF-8, [DONE]).
func (p *Provider) middleware(ep llm.Endpoint, body *llm.AnswerBody) option.RequestOption {
	return option.WithMiddleware(func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
		res, err := next(r)
		return body.Wrap(llm.ErrorFromResponse(ep, res, err))
	})
}

// classify turns SDK and transport errors into *llm.Error.
func (p *Provider) classify(ep llm.Endpoint, parent context.Context, err error) error {
	var se *ssestream.StreamError
	if errors.As(err, &se) && parent.Err() == nil {
		return &llm.Error{Kind: llm.KindServer, Provider: ep.Provider, Retryable: true, Err: err,
			Message: fmt.Sprintf("%s sent an error in the middle of the answer: try again", ep.BaseURL),
			Detail:  strings.TrimPrefix(se.Message, "received error while streaming: ")}
	}
	var ae *oai.Error
	if errors.As(err, &ae) && parent.Err() == nil {
		e := llm.HTTPError(ep, ae.StatusCode, http.Header{}, []byte(ae.RawJSON()))
		e.Err = err
		return e
	}
	return llm.TransportError(ep, parent, p.cfg.Timeout, err)
}

// params translates req into the SDK's request.
func (p *Provider) params(req llm.Request, withTools, withJSON bool) (oai.ChatCompletionNewParams, error) {
	model := req.Model
	if model == "" {
		model = p.cfg.Model
	}
	params := oai.ChatCompletionNewParams{Model: shared.ChatModel(model)}
	system := req.System
	if req.JSON {
		system = strings.TrimSpace(system + "\n\nAnswer with a single JSON value and nothing else.")
	}
	if system != "" {
		params.Messages = append(params.Messages, oai.SystemMessage(system))
	}
	for i, m := range req.Messages {
		msg, err := toMessage(m)
		if err != nil {
			return params, fmt.Errorf("openai: message %d: %w", i, err)
		}
		params.Messages = append(params.Messages, msg)
	}
	if withTools {
		for _, t := range req.Tools {
			schema := map[string]any{"type": "object", "properties": map[string]any{}}
			if len(t.Parameters) > 0 {
				schema = nil
				if err := json.Unmarshal(t.Parameters, &schema); err != nil {
					return params, fmt.Errorf("openai: tool %s: parameters are not a JSON object: %w", t.Name, err)
				}
			}
			def := shared.FunctionDefinitionParam{Name: t.Name, Parameters: shared.FunctionParameters(schema)}
			if t.Description != "" {
				def.Description = oai.String(t.Description)
			}
			params.Tools = append(params.Tools, oai.ChatCompletionFunctionTool(def))
		}
	}
	if withJSON {
		params.ResponseFormat = oai.ChatCompletionNewParamsResponseFormatUnion{OfJSONObject: &shared.ResponseFormatJSONObjectParam{}}
	}
	if req.Temperature != nil {
		params.Temperature = oai.Float(*req.Temperature)
	}
	maxTok := req.MaxTokens
	if maxTok == 0 {
		maxTok = p.cfg.MaxTokens
	}
	if maxTok > 0 {
		if p.hosted {
			params.MaxCompletionTokens = oai.Int(int64(maxTok))
		} else {
			params.MaxTokens = oai.Int(int64(maxTok))
		}
	}
	return params, nil
}

func toMessage(m llm.Message) (oai.ChatCompletionMessageParamUnion, error) {
	switch m.Role {
	case llm.RoleUser:
		return oai.UserMessage(m.Content), nil
	case llm.RoleTool:
		return oai.ToolMessage(m.Content, m.ToolCallID), nil
	case llm.RoleAssistant:
		a := oai.ChatCompletionAssistantMessageParam{}
		if m.Content != "" || len(m.ToolCalls) == 0 {
			a.Content.OfString = oai.String(m.Content)
		}
		for _, tc := range m.ToolCalls {
			args := string(tc.Arguments)
			if args == "" {
				args = "{}"
			}
			a.ToolCalls = append(a.ToolCalls, oai.ChatCompletionMessageToolCallUnionParam{
				OfFunction: &oai.ChatCompletionMessageFunctionToolCallParam{
					ID:       tc.ID,
					Function: oai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: tc.Name, Arguments: args},
				},
			})
		}
		return oai.ChatCompletionMessageParamUnion{OfAssistant: &a}, nil
	}
	return oai.ChatCompletionMessageParamUnion{}, fmt.Errorf("unknown role %q", m.Role)
}
