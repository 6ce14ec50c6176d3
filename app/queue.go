package app

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Queue bounds the executions in the sandbox: at most Workers run at once
// and at most Length more wait; beyond that Acquire fails at once with a
// *QueueFullError, which the API answers with 429 and Retry-After.
type Queue struct {
	slots   chan struct{}
	length  int
	closed  chan struct{} // closed by Close: no more executions start
	mu      sync.Mutex
	waiting int
	avg     time.Duration // moving average of an execution's time
	err     error         // what Acquire returns once closed
}

// NewQueue returns a queue of workers slots and length waiting places.
func NewQueue(workers, length int) *Queue {
	return &Queue{slots: make(chan struct{}, workers), length: length, avg: 100 * time.Millisecond, closed: make(chan struct{})}
}

// Close refuses every execution waiting for a slot, and all later ones,
// with err; those holding a slot go on.
func (q *Queue) Close(err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.err == nil {
		q.err = err
		close(q.closed)
	}
}

func (q *Queue) closedErr() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.err
}

// QueueFullError says the queue is full and when to try again.
type QueueFullError struct {
	RetryAfter time.Duration
}

func (e *QueueFullError) Error() string {
	return fmt.Sprintf("the execution queue is full: try again in %s", e.RetryAfter.Round(time.Second))
}

// Acquire takes a slot, waiting for one in the queue while ctx allows.
// With bounded false the wait is not limited by the queue's length (agent
// runs, which are limited in number elsewhere). release must be called
// when the execution ends.
func (q *Queue) Acquire(ctx context.Context, bounded bool) (release func(), err error) {
	if err := q.closedErr(); err != nil {
		return nil, err
	}
	select {
	case q.slots <- struct{}{}:
		return q.releaser(), nil
	default:
	}
	q.mu.Lock()
	if bounded && q.waiting >= q.length {
		wait := q.avg * time.Duration(q.waiting+1) / time.Duration(cap(q.slots))
		q.mu.Unlock()
		return nil, &QueueFullError{RetryAfter: max(wait, time.Second)}
	}
	q.waiting++
	q.mu.Unlock()
	defer func() {
		q.mu.Lock()
		q.waiting--
		q.mu.Unlock()
	}()
	select {
	case q.slots <- struct{}{}:
		if err := q.closedErr(); err != nil { // both were ready
			<-q.slots
			return nil, err
		}
		return q.releaser(), nil
	case <-q.closed:
		return nil, q.closedErr()
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting in the execution queue: %w", ctx.Err())
	}
}

func (q *Queue) releaser() func() {
	start := time.Now()
	var once sync.Once
	return func() {
		once.Do(func() {
			d := time.Since(start)
			q.mu.Lock()
			q.avg = (q.avg*7 + d) / 8
			q.mu.Unlock()
			<-q.slots
		})
	}
}

// Stats are the queue's sizes: slots, busy slots, capacity and waiting.
func (q *Queue) Stats() (workers, busy, length, waiting int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return cap(q.slots), len(q.slots), q.length, q.waiting
}
