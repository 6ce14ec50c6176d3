package llm

import (
	"context"
	"sort"
	"strings"
	"sync"
)

// Usage is the token count of one request as the server reported it. A
// server that omits usage leaves it zero.
type Usage struct {
	InputTokens  int64
	OutputTokens int64
	// CacheReadTokens and CacheWriteTokens are input tokens served from or
	// written to a prompt cache, when the server says so (already counted in
	// InputTokens for OpenAI; separate for Anthropic, see the backends).
	CacheReadTokens  int64
	CacheWriteTokens int64
}

// Total is input plus output tokens.
func (u Usage) Total() int64 { return u.InputTokens + u.OutputTokens }

// Add returns u plus v.
func (u Usage) Add(v Usage) Usage {
	return Usage{
		InputTokens:      u.InputTokens + v.InputTokens,
		OutputTokens:     u.OutputTokens + v.OutputTokens,
		CacheReadTokens:  u.CacheReadTokens + v.CacheReadTokens,
		CacheWriteTokens: u.CacheWriteTokens + v.CacheWriteTokens,
	}
}

// IsZero reports whether no tokens were counted.
func (u Usage) IsZero() bool { return u == Usage{} }

// Price is what one model costs per million tokens, in whatever currency
// the caller uses. Prices change: the caller supplies them, codeagent holds
// none as truth.
type Price struct {
	InputPerMTok  float64
	OutputPerMTok float64
}

// Cost of u at price p.
func (p Price) Cost(u Usage) float64 {
	return (float64(u.InputTokens)*p.InputPerMTok + float64(u.OutputTokens)*p.OutputPerMTok) / 1e6
}

// Meter adds up usage for a run, per model. It is safe for concurrent use;
// the zero value is ready.
type Meter struct {
	mu       sync.Mutex
	requests int
	byModel  map[string]Usage
}

// Record adds one request's usage for model.
func (m *Meter) Record(model string, u Usage) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.byModel == nil {
		m.byModel = map[string]Usage{}
	}
	m.requests++
	m.byModel[model] = m.byModel[model].Add(u)
}

// Requests is the number of requests recorded.
func (m *Meter) Requests() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.requests
}

// Total is the usage over all models.
func (m *Meter) Total() Usage {
	m.mu.Lock()
	defer m.mu.Unlock()
	var t Usage
	for _, u := range m.byModel {
		t = t.Add(u)
	}
	return t
}

// ByModel returns a copy of the usage per model.
func (m *Meter) ByModel() map[string]Usage {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]Usage, len(m.byModel))
	for k, v := range m.byModel {
		out[k] = v
	}
	return out
}

// Cost prices the usage with prices (keyed by model name as the server
// reported it, or a prefix of it). It returns the models that had tokens but no price; their
// cost is left out of the sum.
func (m *Meter) Cost(prices map[string]Price) (cost float64, unpriced []string) {
	for model, u := range m.ByModel() {
		p, ok := lookupPrice(prices, model)
		if !ok {
			if !u.IsZero() {
				unpriced = append(unpriced, model)
			}
			continue
		}
		cost += p.Cost(u)
	}
	sort.Strings(unpriced)
	return cost, unpriced
}

// lookupPrice finds model's price: an exact key, else the longest key that
// is a prefix of model (so "gpt-4o-mini" prices "gpt-4o-mini-2024-07-18").
func lookupPrice(prices map[string]Price, model string) (Price, bool) {
	if p, ok := prices[model]; ok {
		return p, true
	}
	best, found := "", false
	for k := range prices {
		if k != "" && strings.HasPrefix(model, k) && len(k) > len(best) {
			best, found = k, true
		}
	}
	return prices[best], found
}

// Metered is a [Provider] decorator that records every answer's usage in a
// [Meter], including answers that came with an error (a truncated answer is
// billed all the same). Put it inside [Retry] to count every attempt.
type Metered struct {
	next  Provider
	meter *Meter
}

var _ Provider = (*Metered)(nil)

// NewMetered wraps next, recording into meter.
func NewMetered(next Provider, meter *Meter) *Metered {
	return &Metered{next: next, meter: meter}
}

// Chat implements [Provider].
func (m *Metered) Chat(ctx context.Context, req Request) (Response, error) {
	resp, err := m.next.Chat(ctx, req)
	m.record(req, resp)
	return resp, err
}

// Stream implements [Provider].
func (m *Metered) Stream(ctx context.Context, req Request, onDelta func(string)) (Response, error) {
	resp, err := m.next.Stream(ctx, req, onDelta)
	m.record(req, resp)
	return resp, err
}

func (m *Metered) record(req Request, resp Response) {
	if resp.Usage.IsZero() && resp.Model == "" {
		return // nothing came back: no request to bill
	}
	model := resp.Model
	if model == "" {
		model = req.Model
	}
	m.meter.Record(model, resp.Usage)
}
