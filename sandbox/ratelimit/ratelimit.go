// Package ratelimit is a Sandbox decorator that admits a bounded number of
// executions per minute, as the reference design recommends for each
// session (10 by default). The count is kept in a Bucket: in memory for one
// process (New), or one that processes share (NewShared, e.g. a row of the
// store), so that several processes running one session stay within its
// limit together.
package ratelimit

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/codeagent/codeagent/sandbox"
)

// DefaultPerMinute is the reference design's recommendation.
const DefaultPerMinute = 10

// Bucket is a token bucket of perMinute tokens a minute, at most perMinute
// held. Take takes a token when one is there, or reserves the next when it
// comes within maxWait (Reservation.Wait says how long to wait for it);
// beyond maxWait it takes nothing, OK is false and Wait says when one would
// be there.
type Bucket interface {
	Take(ctx context.Context, maxWait time.Duration) (Reservation, error)
}

// Reservation is what Take took.
type Reservation struct {
	OK   bool
	Wait time.Duration
	// Cancel gives the token back, for an execution that did not run.
	Cancel func()
}

// Limiter admits PerMinute executions per minute, in bursts of up to
// PerMinute. A caller over the limit waits when the wait fits its context's
// deadline, and gets a *LimitError at once otherwise; the program then does
// not run.
type Limiter struct {
	next      sandbox.Sandbox
	perMinute int
	bucket    Bucket
}

var _ sandbox.Sandbox = (*Limiter)(nil)

// New wraps next with a bucket of this process; perMinute <= 0 means
// DefaultPerMinute.
func New(next sandbox.Sandbox, perMinute int) *Limiter {
	perMinute = PerMinute(perMinute)
	return NewShared(next, perMinute, NewMemoryBucket(perMinute))
}

// NewShared wraps next with bucket, which was made for perMinute.
func NewShared(next sandbox.Sandbox, perMinute int, bucket Bucket) *Limiter {
	return &Limiter{next: next, perMinute: PerMinute(perMinute), bucket: bucket}
}

// PerMinute is n, or DefaultPerMinute when n <= 0.
func PerMinute(n int) int {
	if n <= 0 {
		return DefaultPerMinute
	}
	return n
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
	maxWait := time.Duration(math.MaxInt64)
	if dl, ok := ctx.Deadline(); ok {
		maxWait = time.Until(dl)
	}
	r, err := l.bucket.Take(ctx, maxWait)
	if err != nil {
		return fmt.Errorf("rate limit: %w", err)
	}
	if !r.OK {
		return &LimitError{PerMinute: l.perMinute, Wait: r.Wait}
	}
	if r.Wait > 0 {
		if notice, ok := ctx.Value(noticeKey{}).(func(time.Duration, int)); ok {
			notice(r.Wait, l.perMinute)
		}
		t := time.NewTimer(r.Wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			if r.Cancel != nil {
				r.Cancel()
			}
			return fmt.Errorf("waiting for the rate limit: %w", ctx.Err())
		}
	}
	return nil
}

type noticeKey struct{}

// WithWaitNotice returns ctx under which an execution that must wait for
// its rate limit first calls notice with the wait and the limit, so that
// the wait is shown rather than looking like a stall.
func WithWaitNotice(ctx context.Context, notice func(wait time.Duration, perMinute int)) context.Context {
	return context.WithValue(ctx, noticeKey{}, notice)
}

// Close closes the wrapped sandbox.
func (l *Limiter) Close() error { return l.next.Close() }

// memoryBucket is a Bucket of this process.
type memoryBucket struct {
	mu  sync.Mutex
	lim *rate.Limiter
}

// NewMemoryBucket returns a bucket of this process for perMinute.
func NewMemoryBucket(perMinute int) Bucket {
	perMinute = PerMinute(perMinute)
	return &memoryBucket{lim: rate.NewLimiter(rate.Limit(float64(perMinute)/60), perMinute)}
}

func (b *memoryBucket) Take(_ context.Context, maxWait time.Duration) (Reservation, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.lim.Reserve()
	wait := r.Delay()
	if wait > maxWait {
		r.Cancel()
		return Reservation{Wait: wait}, nil
	}
	return Reservation{OK: true, Wait: wait, Cancel: r.Cancel}, nil
}
