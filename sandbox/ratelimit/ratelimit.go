// Package ratelimit is a Sandbox decorator that admits a bounded number of
// executions per minute, as the reference design recommends for each
// session (10 by default).
package ratelimit

import (
	"context"
	"fmt"
	"time"

	"golang.org/x/time/rate"

	"github.com/codeagent/codeagent/sandbox"
)

// DefaultPerMinute is the reference design's recommendation.
const DefaultPerMinute = 10

// Limiter admits PerMinute executions per minute, in bursts of up to
// PerMinute. A caller over the limit waits when the wait fits its context's
// deadline, and gets a *LimitError at once otherwise; the program then does
// not run.
type Limiter struct {
	next      sandbox.Sandbox
	perMinute int
	lim       *rate.Limiter
}

var _ sandbox.Sandbox = (*Limiter)(nil)

// New wraps next; perMinute <= 0 means DefaultPerMinute.
func New(next sandbox.Sandbox, perMinute int) *Limiter {
	if perMinute <= 0 {
		perMinute = DefaultPerMinute
	}
	return &Limiter{next: next, perMinute: perMinute, lim: rate.NewLimiter(rate.Limit(float64(perMinute)/60), perMinute)}
}

// LimitError reports that an execution was refused by the rate limit.
type LimitError struct {
	PerMinute int
	Wait      time.Duration // until the next execution would be admitted
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("rate limit of %d executions per minute reached: the next is possible in %s, after the deadline",
		e.PerMinute, e.Wait.Round(100*time.Millisecond))
}

// Run waits for the limit, if that fits ctx, then runs spec.
func (l *Limiter) Run(ctx context.Context, spec sandbox.Spec) (sandbox.Result, error) {
	if err := l.Wait(ctx); err != nil {
		return sandbox.Result{}, err
	}
	return l.next.Run(ctx, spec)
}

// Wait admits one execution made without Run (a kernel's cell): it waits
// for the limit if that fits ctx, and otherwise fails as Run does.
func (l *Limiter) Wait(ctx context.Context) error {
	r := l.lim.Reserve()
	if wait := r.Delay(); wait > 0 {
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			r.Cancel()
			return &LimitError{PerMinute: l.perMinute, Wait: wait}
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			r.Cancel()
			return fmt.Errorf("waiting for the rate limit: %w", ctx.Err())
		}
	}
	return nil
}

// Close closes the wrapped sandbox.
func (l *Limiter) Close() error { return l.next.Close() }

// Spend counts n executions made elsewhere (by an earlier process of the
// same session) against the limit.
func (l *Limiter) Spend(n int) {
	if n > 0 {
		l.lim.ReserveN(time.Now(), min(n, l.perMinute))
	}
}
