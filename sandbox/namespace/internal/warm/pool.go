package warm

import (
	"log/slog"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/codeagent/codeagent/sandbox"
)

// Bounds of a pool.
const (
	maxAge      = 30 * time.Minute // older interpreters are replaced, not used
	maxFailures = 3                // consecutive warm-up failures that stop the pool
	// demandWindow is how far back Take's calls count as demand: the pool
	// keeps as many interpreters ready as were asked for in it (at least
	// one, at most Size), and after a window without demand it is back to
	// one.
	demandWindow = time.Minute
)

// Interp is what a pool needs of a warm interpreter; the backend's
// implements it.
type Interp interface {
	// Exited reports whether the interpreter's sandbox has ended.
	Exited() bool
	// Discard ends the interpreter's sandbox and releases what it holds.
	// The pool calls it for the interpreters it never hands out.
	Discard()
	// StartCPU is the CPU time its start (the imports) used.
	StartCPU() time.Duration
}

// PoolConfig is what a pool needs from its backend.
type PoolConfig[T Interp] struct {
	// Size is the most interpreters kept ready (see SizeFor).
	Size int
	// Starting is the most interpreters started at once; 0 is one per
	// CPU. Each start costs most of a second of CPU, at a weight that
	// yields it to executions.
	Starting int
	// Start starts an interpreter and returns it once it has imported
	// the stack (see AwaitReady). The backend runs the start at a lower
	// CPU priority than executions.
	Start func() (T, error)
	// Background runs fn in a goroutine the backend's Close waits for.
	Background func(fn func())
	// Log receives the warm-up failures; nil discards them.
	Log *slog.Logger
}

// Pool keeps warm interpreters ready: as many as recent demand asked for
// (see demandWindow), started a few at a time, each handed out once. The
// caller discards an interpreter after its execution and calls Fill.
type Pool[T Interp] struct {
	cfg PoolConfig[T]
	now func() time.Time

	mu       sync.Mutex
	ready    []born[T]
	starting int
	closed   bool
	failures int
	runs     int64             // executions that ran warm (not those that fell back)
	takes    []time.Time       // Take's last calls (at most Size), oldest first
	trimming bool              // a trim is scheduled
	stats    sandbox.PoolStats // the counters
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
	if cfg.Starting <= 0 {
		cfg.Starting = max(1, runtime.NumCPU())
	}
	return &Pool[T]{cfg: cfg, now: time.Now}
}

// SizeFor is the most interpreters a pool keeps on a machine with cpus
// CPUs and memAvailable bytes of memory available: one per CPU, within a
// sixteenth of the memory (each holds about 90 MB while it waits), at
// least one.
func SizeFor(cpus int, memAvailable int64) int {
	const perInterp = 128 << 20
	return max(1, min(cpus, int(memAvailable/16/perInterp)))
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
	p.takes = append(p.takes, p.now())
	if n := len(p.takes) - max(p.cfg.Size, 1); n > 0 {
		p.takes = slices.Delete(p.takes, 0, n) // more than Size never counts
	}
	for len(p.ready) > 0 {
		b := p.ready[0]
		p.ready = p.ready[1:]
		if !b.w.Exited() && p.now().Sub(b.at) < maxAge {
			p.stats.Hits++
			return b.w, true
		}
		p.cfg.Background(b.w.Discard)
	}
	p.stats.Misses++
	p.fillLocked()
	return none, false
}

// Fill starts interpreters until the pool holds what recent demand asks
// for.
func (p *Pool[T]) Fill() {
	p.mu.Lock()
	p.fillLocked()
	p.mu.Unlock()
}

// targetLocked is how many interpreters to keep ready: Take's calls in the
// last demandWindow, at least one, at most Size.
func (p *Pool[T]) targetLocked() int {
	cut := p.now().Add(-demandWindow)
	i := 0
	for i < len(p.takes) && p.takes[i].Before(cut) {
		i++
	}
	p.takes = p.takes[i:]
	return max(1, min(len(p.takes), p.cfg.Size))
}

func (p *Pool[T]) fillLocked() {
	target := p.targetLocked()
	for !p.closed && p.failures < maxFailures && len(p.ready)+p.starting < target && p.starting < p.cfg.Starting {
		p.starting++
		p.stats.Refills++
		p.cfg.Background(p.start)
	}
	if len(p.ready) > 1 && !p.trimming && !p.closed {
		p.trimming = true
		time.AfterFunc(demandWindow, p.trim)
	}
}

// start starts one interpreter and, when it is ready, the next one the
// demand asks for.
func (p *Pool[T]) start() {
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
	p.stats.RefillCPU += w.StartCPU()
	p.ready = append(p.ready, born[T]{w: w, at: at})
	p.fillLocked()
}

// trim discards the ready interpreters beyond what recent demand asks
// for, oldest first: an idle pool shrinks to one.
func (p *Pool[T]) trim() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.trimming = false
	if p.closed {
		return
	}
	for extra := len(p.ready) - p.targetLocked(); extra > 0; extra-- {
		p.cfg.Background(p.ready[0].w.Discard)
		p.ready = p.ready[1:]
	}
	p.fillLocked() // schedules the next trim while more than one is ready
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

// Stats reports the pool's state and counters, as pool "python".
func (p *Pool[T]) Stats() sandbox.PoolStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.stats
	s.Pool, s.Size, s.Target, s.Ready, s.Starting = "python", p.cfg.Size, p.targetLocked(), len(p.ready), p.starting
	return s
}
