package llm

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// RetryPolicy says how often and how long [Retry] waits. The zero value
// means the defaults of [DefaultRetryPolicy].
type RetryPolicy struct {
	// MaxAttempts counts the first try; 1 disables retries.
	MaxAttempts int
	// BaseDelay is the first backoff; each retry doubles it.
	BaseDelay time.Duration
	// MaxDelay caps every wait. A server that asks (Retry-After) for longer
	// than MaxDelay gets no retry: its error is returned at once, naming the
	// wait, rather than blocking the run.
	MaxDelay time.Duration
}

// DefaultRetryPolicy is 4 attempts, 1s base delay, 30s cap.
func DefaultRetryPolicy() RetryPolicy {
	return RetryPolicy{MaxAttempts: 4, BaseDelay: time.Second, MaxDelay: 30 * time.Second}
}

func (p RetryPolicy) withDefaults() RetryPolicy {
	d := DefaultRetryPolicy()
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = d.MaxAttempts
	}
	if p.BaseDelay <= 0 {
		p.BaseDelay = d.BaseDelay
	}
	if p.MaxDelay <= 0 {
		p.MaxDelay = d.MaxDelay
	}
	return p
}

// Retry is a [Provider] decorator that retries retryable [*Error]s (429,
// 5xx, connection resets, timeouts) with exponential backoff and
// jitter, honouring the server's Retry-After. It is the only retry policy:
// backends turn off their SDKs' own retries.
//
// A Stream is retried only while no text has reached onDelta, so the caller
// never sees a fragment twice.
type Retry struct {
	next   Provider
	policy RetryPolicy
	log    *slog.Logger
	// Sleep waits d or until ctx ends; tests replace it to record waits.
	Sleep func(ctx context.Context, d time.Duration) error
}

var _ Provider = (*Retry)(nil)

// NewRetry wraps next. logger may be nil.
func NewRetry(next Provider, policy RetryPolicy, logger *slog.Logger) *Retry {
	return &Retry{next: next, policy: policy.withDefaults(), log: orDiscard(logger), Sleep: sleepCtx}
}

// Chat implements [Provider].
func (r *Retry) Chat(ctx context.Context, req Request) (Response, error) {
	return r.do(ctx, func() (Response, bool, error) {
		resp, err := r.next.Chat(ctx, req)
		return resp, true, err
	})
}

// Stream implements [Provider].
func (r *Retry) Stream(ctx context.Context, req Request, onDelta func(string)) (Response, error) {
	return r.do(ctx, func() (Response, bool, error) {
		sent := false
		resp, err := r.next.Stream(ctx, req, func(s string) {
			sent = true
			if onDelta != nil {
				onDelta(s)
			}
		})
		return resp, !sent, err
	})
}

// do runs try until it succeeds, fails for good, or attempts run out. try
// reports whether a retry is still allowed after its failure.
func (r *Retry) do(ctx context.Context, try func() (Response, bool, error)) (Response, error) {
	for attempt := 1; ; attempt++ {
		resp, again, err := try()
		if err == nil || !again || attempt >= r.policy.MaxAttempts || !IsRetryable(err) {
			return resp, err
		}
		if e := (*Error)(nil); errors.As(err, &e) && e.MaxAttempts > 0 && attempt >= e.MaxAttempts {
			return resp, err
		}
		wait, ok := r.wait(attempt, err)
		if !ok {
			return resp, err
		}
		r.log.Warn("llm: retrying", "attempt", attempt+1, "of", r.policy.MaxAttempts, "wait", wait, "err", err)
		if serr := r.Sleep(ctx, wait); serr != nil {
			return resp, TransportError(Endpoint{}, ctx, 0, serr)
		}
	}
}

// wait is the pause before attempt+1: the server's Retry-After if it gave
// one (no retry when that exceeds MaxDelay), else BaseDelay*2^(attempt-1)
// capped at MaxDelay, drawn at random from [d/2, d] (jitter).
func (r *Retry) wait(attempt int, err error) (time.Duration, bool) {
	var e *Error
	errors.As(err, &e)
	if e != nil && e.RetryAfter > 0 {
		if e.RetryAfter > r.policy.MaxDelay {
			return 0, false
		}
		return e.RetryAfter, true
	}
	d := r.policy.BaseDelay << min(attempt-1, 30)
	if d <= 0 || d > r.policy.MaxDelay {
		d = r.policy.MaxDelay
	}
	half := d / 2
	return half + time.Duration(rand.Int64N(int64(d-half)+1)), true
}

// ParseRetryAfter reads a Retry-After header value: delay-seconds or an
// HTTP-date (relative to now). It reports false for an empty or bad value.
// Some servers send fractional seconds ("1.5"); those are accepted too.
func ParseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseFloat(v, 64); err == nil {
		if secs < 0 || secs > 1e6 {
			return 0, false
		}
		return time.Duration(secs * float64(time.Second)), true
	}
	if t, err := http.ParseTime(v); err == nil {
		d := t.Sub(now)
		if d < 0 {
			d = 0
		}
		return d, true
	}
	return 0, false
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func orDiscard(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}
