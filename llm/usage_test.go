package llm

import (
	"context"
	"math"
	"sync"
	"testing"
)

func TestMeterConcurrentAndCost(t *testing.T) {
	var m Meter
	var wg sync.WaitGroup
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			model := "gpt-4o-mini-2024-07-18"
			if i%2 == 1 {
				model = "llama3.1"
			}
			m.Record(model, Usage{InputTokens: 1000, OutputTokens: 100})
		}(i)
	}
	wg.Wait()
	if m.Requests() != 50 || m.Total() != (Usage{InputTokens: 50000, OutputTokens: 5000}) {
		t.Fatalf("total %+v over %d", m.Total(), m.Requests())
	}
	cost, unpriced := m.Cost(map[string]Price{"gpt-4o-mini": {InputPerMTok: 0.15, OutputPerMTok: 0.6}, "gpt-4o": {InputPerMTok: 99}})
	want := (25000*0.15 + 2500*0.6) / 1e6
	if math.Abs(cost-want) > 1e-12 || len(unpriced) != 1 || unpriced[0] != "llama3.1" {
		t.Errorf("cost %v unpriced %v, want %v [llama3.1]", cost, unpriced, want)
	}
	if len(m.ByModel()) != 2 {
		t.Errorf("by model = %v", m.ByModel())
	}
}

func TestMeteredRecordsFailedAnswersToo(t *testing.T) {
	var m Meter
	p := NewMetered(usageScript{}, &m)
	_, _ = p.Chat(context.Background(), Request{Model: "m"})
	_, _ = p.Stream(context.Background(), Request{Model: "m"}, nil)
	if m.Requests() != 2 || m.Total().OutputTokens != 10 || m.ByModel()["m"].InputTokens != 6 {
		t.Errorf("meter %+v %d", m.ByModel(), m.Requests())
	}
}

type usageScript struct{}

func (usageScript) Chat(ctx context.Context, req Request) (Response, error) {
	return Response{Text: "x", FinishReason: FinishLength, Usage: Usage{InputTokens: 3, OutputTokens: 5}},
		&Error{Kind: KindTruncated}
}

func (u usageScript) Stream(ctx context.Context, req Request, _ func(string)) (Response, error) {
	return u.Chat(ctx, req)
}
