package llm

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"
)

// script is a Provider returning scripted outcomes in order.
type script struct {
	errs   []error
	calls  int
	deltas []string // sent to onDelta before each failure
}

func (s *script) Chat(ctx context.Context, req Request) (Response, error) {
	s.calls++
	if i := s.calls - 1; i < len(s.errs) && s.errs[i] != nil {
		return Response{}, s.errs[i]
	}
	return Response{Text: "ok"}, nil
}

func (s *script) Stream(ctx context.Context, req Request, onDelta func(string)) (Response, error) {
	if i := s.calls; i < len(s.deltas) && s.deltas[i] != "" {
		onDelta(s.deltas[i])
	}
	return s.Chat(ctx, req)
}

func retryable(k Kind, after time.Duration) error {
	return &Error{Kind: k, Retryable: true, RetryAfter: after, Message: string(k)}
}

func newTestRetry(next Provider, p RetryPolicy) (*Retry, *[]time.Duration) {
	r := NewRetry(next, p, nil)
	var waits []time.Duration
	r.Sleep = func(ctx context.Context, d time.Duration) error {
		waits = append(waits, d)
		return ctx.Err()
	}
	return r, &waits
}

func TestRetryBackoffWithJitter(t *testing.T) {
	s := &script{errs: []error{retryable(KindServer, 0), retryable(KindNetwork, 0), retryable(KindTimeout, 0), retryable(KindServer, 0)}}
	r, waits := newTestRetry(s, RetryPolicy{MaxAttempts: 5, BaseDelay: 100 * time.Millisecond, MaxDelay: 300 * time.Millisecond})
	resp, err := r.Chat(context.Background(), Request{})
	if err != nil || resp.Text != "ok" || s.calls != 5 {
		t.Fatalf("resp %+v err %v calls %d", resp, err, s.calls)
	}
	caps := []time.Duration{100, 200, 300, 300}
	for i, w := range *waits {
		hi := caps[i] * time.Millisecond
		if w < hi/2 || w > hi {
			t.Errorf("wait %d = %v, want in [%v, %v]", i, w, hi/2, hi)
		}
	}
}

func TestRetryHonoursRetryAfter(t *testing.T) {
	s := &script{errs: []error{retryable(KindRateLimit, 2*time.Second)}}
	r, waits := newTestRetry(s, RetryPolicy{MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: 5 * time.Second})
	if _, err := r.Chat(context.Background(), Request{}); err != nil {
		t.Fatal(err)
	}
	if len(*waits) != 1 || (*waits)[0] != 2*time.Second {
		t.Errorf("waits = %v", *waits)
	}
}

func TestRetryAfterBeyondCapGivesUp(t *testing.T) {
	s := &script{errs: []error{retryable(KindRateLimit, time.Hour)}}
	r, waits := newTestRetry(s, RetryPolicy{MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: time.Second})
	_, err := r.Chat(context.Background(), Request{})
	if KindOf(err) != KindRateLimit || s.calls != 1 || len(*waits) != 0 {
		t.Errorf("err %v calls %d waits %v", err, s.calls, *waits)
	}
}

func TestRetryStopsOnPermanentErrorsAndAfterMaxAttempts(t *testing.T) {
	s := &script{errs: []error{&Error{Kind: KindAuth, Message: "no"}}}
	r, _ := newTestRetry(s, RetryPolicy{MaxAttempts: 3, BaseDelay: time.Millisecond})
	if _, err := r.Chat(context.Background(), Request{}); KindOf(err) != KindAuth || s.calls != 1 {
		t.Errorf("auth: err %v calls %d", err, s.calls)
	}
	s = &script{errs: []error{retryable(KindServer, 0), retryable(KindServer, 0), retryable(KindServer, 0), nil}}
	r, _ = newTestRetry(s, RetryPolicy{MaxAttempts: 3, BaseDelay: time.Millisecond})
	if _, err := r.Chat(context.Background(), Request{}); KindOf(err) != KindServer || s.calls != 3 {
		t.Errorf("exhausted: err %v calls %d", err, s.calls)
	}
	plain := errors.New("not typed")
	s = &script{errs: []error{plain}}
	r, _ = newTestRetry(s, RetryPolicy{})
	if _, err := r.Chat(context.Background(), Request{}); err != plain || s.calls != 1 {
		t.Errorf("untyped: err %v calls %d", err, s.calls)
	}
}

func TestRetryHonoursTheErrorsMaxAttempts(t *testing.T) {
	died := &Error{Kind: KindModelLoad, Retryable: true, MaxAttempts: 2}
	s := &script{errs: []error{died, died, died, nil}}
	r, _ := newTestRetry(s, RetryPolicy{MaxAttempts: 4, BaseDelay: time.Millisecond})
	if _, err := r.Chat(context.Background(), Request{}); KindOf(err) != KindModelLoad || s.calls != 2 {
		t.Errorf("err %v calls %d, want 2 calls", err, s.calls)
	}
}

func TestRetryStreamNotAfterDelta(t *testing.T) {
	s := &script{errs: []error{retryable(KindNetwork, 0), retryable(KindNetwork, 0)}, deltas: []string{"", "partial"}}
	r, _ := newTestRetry(s, RetryPolicy{MaxAttempts: 5, BaseDelay: time.Millisecond})
	var got []string
	_, err := r.Stream(context.Background(), Request{}, func(d string) { got = append(got, d) })
	if KindOf(err) != KindNetwork || s.calls != 2 || len(got) != 1 {
		t.Errorf("err %v calls %d deltas %v", err, s.calls, got)
	}
}

func TestRetryCanceledWhileWaiting(t *testing.T) {
	s := &script{errs: []error{retryable(KindServer, 0), retryable(KindServer, 0)}}
	r := NewRetry(s, RetryPolicy{MaxAttempts: 3, BaseDelay: time.Hour, MaxDelay: time.Hour}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	_, err := r.Chat(ctx, Request{})
	if KindOf(err) != KindCanceled || !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v", err)
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, c := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"7", 7 * time.Second, true},
		{" 0 ", 0, true},
		{"1.5", 1500 * time.Millisecond, true},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second, true},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0, true},
		{"", 0, false},
		{"-3", 0, false},
		{"soon", 0, false},
	} {
		got, ok := ParseRetryAfter(c.in, now)
		if got != c.want || ok != c.ok {
			t.Errorf("ParseRetryAfter(%q) = %v, %v; want %v, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}
