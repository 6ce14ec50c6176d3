package warm

import (
	"log/slog"
	"sync"
	"time"
)

// Bounds of a pool.
const (
	maxAge      = 30 * time.Minute // older interpreters are replaced, not used
	maxFailures = 3                // consecutive warm-up failures that stop the pool
)

// Interp is what a pool needs of a warm interpreter; the backend's
// implements it.
type Interp interface {
	// Exited reports whether the interpreter's sandbox has ended.
	Exited() bool
	// Discard ends the interpreter's sandbox and releases what it holds.
	// The pool calls it for the interpreters it never hands out.
	Discard()
}

// PoolConfig is what a pool needs from its backend.
type PoolConfig[T Interp] struct {
	// Size is how many interpreters to keep ready.
	Size int
	// Start starts an interpreter and returns it once it has imported
	// the stack (see AwaitReady).
	Start func() (T, error)
	// Background runs fn in a goroutine the backend's Close waits for.
	Background func(fn func())
	// Log receives the warm-up failures; nil discards them.
	Log *slog.Logger
}

// Pool keeps warm interpreters ready. Each is handed out once; the caller
// discards it after its execution and calls Fill.
type Pool[T Interp] struct {
	cfg PoolConfig[T]
	now func() time.Time

	mu       sync.Mutex
	ready    []born[T]
	starting int
	closed   bool
	failures int
	runs     int64 // executions that ran warm (not those that fell back)
}

// born is a ready interpreter and when its start began.
type born[T Interp] struct {
	w  T
	at time.Time
}

// NewPool returns an empty pool; Take or Fill starts its interpreters.
func NewPool[T Interp](cfg PoolConfig[T]) *Pool[T] {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Pool[T]{cfg: cfg, now: time.Now}
}

// Take returns a ready interpreter, or false: the caller runs cold rather
// than wait for one being warmed (which takes longer than a cold start),
// and the pool fills up in the background.
func (p *Pool[T]) Take() (T, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var none T
	if p.closed || p.failures >= maxFailures {
		return none, false
	}
	for len(p.ready) > 0 {
		b := p.ready[0]
		p.ready = p.ready[1:]
		if !b.w.Exited() && p.now().Sub(b.at) < maxAge {
			return b.w, true
		}
		p.cfg.Background(b.w.Discard)
	}
	p.fillLocked()
	return none, false
}

// Fill starts interpreters until the pool is full.
func (p *Pool[T]) Fill() {
	p.mu.Lock()
	p.fillLocked()
	p.mu.Unlock()
}

func (p *Pool[T]) fillLocked() {
	for !p.closed && p.failures < maxFailures && len(p.ready)+p.starting < p.cfg.Size {
		p.starting++
		p.cfg.Background(func() {
			at := p.now()
			w, err := p.cfg.Start()
			p.mu.Lock()
			defer p.mu.Unlock()
			p.starting--
			if err != nil {
				p.failures++
				p.cfg.Log.Warn("start a warm interpreter", "err", err, "failures", p.failures)
				return
			}
			p.failures = 0
			if p.closed {
				p.cfg.Background(w.Discard)
				return
			}
			p.ready = append(p.ready, born[T]{w: w, at: at})
		})
	}
}

// Close discards the ready interpreters; those being started are
// discarded when they are ready (the backend's Close waits for its
// background work).
func (p *Pool[T]) Close() {
	p.mu.Lock()
	p.closed = true
	ready := p.ready
	p.ready = nil
	p.mu.Unlock()
	for _, b := range ready {
		b.w.Discard()
	}
}

// Ran counts an execution that ran in a warm interpreter.
func (p *Pool[T]) Ran() {
	p.mu.Lock()
	p.runs++
	p.mu.Unlock()
}

// Runs reports how many executions ran in a warm interpreter.
func (p *Pool[T]) Runs() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.runs
}
