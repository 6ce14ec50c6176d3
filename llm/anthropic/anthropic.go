// Package anthropic is the llm.Provider for Anthropic's Messages API, on the
// official SDK with its retries off (the llm.Retry decorator is the one
// retry policy) and its environment defaults off (the llm.Config is the only
// source of settings). The SDK's wire types stay inside this package.
//
// Mapping notes: the system prompt goes in "system"; tool results travel as
// tool_result blocks in a user turn, consecutive turns of one role are
// merged (the API wants them alternating); Anthropic has no JSON mode, so a
// JSON request is an instruction in the system prompt; a server that
// refuses tools gets the request again without them (Response.Notes).
// Usage.InputTokens is the uncached input as Anthropic reports it; cache
// reads and writes are in CacheReadTokens and CacheWriteTokens.
package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
	"github.com/codeagent/codeagent/llm"
)

// Provider talks to one Anthropic Messages endpoint.
type Provider struct {
	cfg    llm.Config
	client sdk.Client
	log    *slog.Logger
}

var _ llm.Provider = (*Provider)(nil)

// New returns a Provider for cfg (which must validate). logger may be nil.
func New(cfg llm.Config, logger *slog.Logger) (*Provider, error) {
	if cfg.Provider == "" {
		cfg.Provider = llm.ProviderAnthropic
	}
	if cfg.KeyVar == "" {
		cfg.KeyVar = llm.EnvAnthropicKey
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	// The SDK computes its own (long) timeout unless one is given; ours is
	// enforced through the context, so give the SDK a generous ceiling.
	sdkTimeout := 24 * time.Hour
	if cfg.Timeout > 0 {
		sdkTimeout = cfg.Timeout + time.Minute
	}
	opts := []option.RequestOption{
		option.WithoutEnvironmentDefaults(),
		option.WithBaseURL(cfg.BaseURL),
		option.WithHTTPClient(&http.Client{}),
		option.WithMaxRetries(0),
		option.WithRequestTimeout(sdkTimeout),
	}
	key := cfg.APIKey
	if key == "" {
		key = "local" // placeholder for local proxies: the SDK wants a credential
	}
	opts = append(opts, option.WithAPIKey(key))
	return &Provider{cfg: cfg, client: sdk.NewClient(opts...), log: logger}, nil
}

// Chat implements llm.Provider.
func (p *Provider) Chat(ctx context.Context, req llm.Request) (llm.Response, error) {
	return p.run(ctx, req, func(ctx context.Context, params sdk.MessageNewParams, ep llm.Endpoint, body *llm.AnswerBody) (llm.Response, error) {
		m, err := p.client.Messages.New(ctx, params, p.middleware(ep, body))
		if err != nil {
			return llm.Response{}, err
		}
		return fromMessage(m, string(params.Model)), nil
	})
}

// Stream implements llm.Provider.
func (p *Provider) Stream(ctx context.Context, req llm.Request, onDelta func(string)) (llm.Response, error) {
	return p.run(ctx, req, func(ctx context.Context, params sdk.MessageNewParams, ep llm.Endpoint, body *llm.AnswerBody) (llm.Response, error) {
		return p.stream(ctx, params, ep, body, onDelta)
	})
}

// sendFunc sends one request; body watches its answer.
type sendFunc func(ctx context.Context, params sdk.MessageNewParams, ep llm.Endpoint, body *llm.AnswerBody) (llm.Response, error)

// run sends req; a server that refuses its tools (an Anthropic-compatible
// proxy in front of a model without them) gets it once more without, and
// the Response says so.
func (p *Provider) run(parent context.Context, req llm.Request, send sendFunc) (llm.Response, error) {
	resp, err := p.send(parent, req, send)
	if err == nil || len(req.Tools) == 0 || !llm.Refuses(err, "tool") {
		return resp, err
	}
	p.log.Warn("llm/anthropic: server refused tools; retrying without", "base_url", p.cfg.BaseURL, "err", err)
	req.Tools = nil
	resp, err = p.send(parent, req, send)
	resp.Notes = append([]string{fmt.Sprintf("%s did not accept tool definitions, so the request was sent without tools", p.cfg.BaseURL)}, resp.Notes...)
	resp.ToolsDropped = true
	return resp, err
}

func (p *Provider) send(parent context.Context, req llm.Request, send sendFunc) (llm.Response, error) {
	ep := p.endpoint(req)
	params, err := p.params(req)
	if err != nil {
		return llm.Response{}, err
	}
	ctx, cancel := context.WithCancel(parent)
	if p.cfg.Timeout > 0 {
		ctx, cancel = context.WithTimeout(parent, p.cfg.Timeout)
	}
	body := llm.NewAnswerBody(ep, p.cfg.AnswerCap())
	resp, err := send(ctx, params, ep, body)
	cancel()
	if err != nil {
		return resp, p.classify(ep, parent, body.Annotate(err))
	}
	return resp, llm.CheckAnswer(ep, resp, int(params.MaxTokens), body)
}

func (p *Provider) endpoint(req llm.Request) llm.Endpoint {
	return p.cfg.EndpointFor(req.Model)
}

// middleware turns any HTTP error status into an *llm.Error, so that
// proxies with non-Anthropic error bodies are handled the same way, and has
// body watch the answer (size cap, raw UTF-8).
func (p *Provider) middleware(ep llm.Endpoint, body *llm.AnswerBody) option.RequestOption {
	return option.WithMiddleware(func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
		res, err := next(r)
		return body.Wrap(llm.ErrorFromResponse(ep, res, err))
	})
}

// streamErrorStatus maps the error types of an SSE "error" event to the
// HTTP status the same failure has outside a stream.
var streamErrorStatus = map[string]int{
	"invalid_request_error": 400, "authentication_error": 401, "permission_error": 403,
	"not_found_error": 404, "request_too_large": 413, "rate_limit_error": 429,
	"api_error": 500, "overloaded_error": 529,
}

func (p *Provider) classify(ep llm.Endpoint, parent context.Context, err error) error {
	if parent.Err() == nil {
		var ae *sdk.Error
		if errors.As(err, &ae) {
			raw := []byte(ae.RawJSON())
			status := ae.StatusCode
			if s, ok := streamErrorStatus[string(ae.Type())]; ok && (status == 0 || status == 200) {
				status = s
			}
			e := llm.HTTPError(ep, status, http.Header{}, raw)
			e.Err = err
			return e
		}
		const prefix = "received error while streaming: "
		if msg := err.Error(); strings.HasPrefix(msg, prefix) {
			body := []byte(strings.TrimPrefix(msg, prefix))
			var ev struct {
				Error struct {
					Type string `json:"type"`
				} `json:"error"`
			}
			status := 500
			if json.Unmarshal(body, &ev) == nil {
				if s, ok := streamErrorStatus[ev.Error.Type]; ok {
					status = s
				}
			}
			e := llm.HTTPError(ep, status, http.Header{}, body)
			e.Message = fmt.Sprintf("%s sent an error in the middle of the answer: %s", ep.BaseURL, e.Message)
			e.Err = err
			return e
		}
	}
	return llm.TransportError(ep, parent, p.cfg.Timeout, err)
}
