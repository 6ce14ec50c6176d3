// Package warmpool keeps sandboxes started ahead, per limits class, for the
// backends whose sandboxes are used once (docker's containers, kubernetes's
// Pods): a sandbox is taken for one execution and destroyed afterwards, and
// the pool refills in the background. At most MaxClasses classes are kept;
// the least recently used goes first. After three failed creations in a
// row, a class stops refilling until the next Check.
package warmpool

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/codeagent/codeagent/sandbox"
)

// ErrClosed is returned by Take after Close.
var ErrClosed = errors.New("backend closed")

// Config is what a pool needs from its backend. C is a limits class, B a
// sandbox.
type Config[C, B any] struct {
	// Warm is how many idle sandboxes to keep per class; 0 keeps none.
	Warm       int
	MaxClasses int
	// Key names a class.
	Key func(C) string
	// Create starts a sandbox of a class within ctx, bounded by
	// CreateTimeout.
	Create        func(context.Context, C) (B, error)
	CreateTimeout time.Duration
	// Destroy removes a sandbox; it runs in the background.
	Destroy func(B)
	// CreateFailed is told of a failed creation for the pool.
	CreateFailed func(error)
}

// Pool holds the idle sandboxes. Its methods are safe for concurrent use.
type Pool[C, B any] struct {
	cfg     Config[C, B]
	mu      sync.Mutex
	classes map[string]*class[C, B]
	closed  bool
	bg      sync.WaitGroup // creations and removals under way
	// counters for Stats
	hits, misses, refills uint64
}

type class[C, B any] struct {
	class    C
	idle     []B
	starting int
	lastUse  time.Time
	failures int
}

// New returns an empty pool.
func New[C, B any](cfg Config[C, B]) *Pool[C, B] {
	return &Pool[C, B]{cfg: cfg, classes: map[string]*class[C, B]{}}
}

// Prime makes c a warm class and starts filling it.
func (p *Pool[C, B]) Prime(c C) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.warmLocked(c)
	p.refillLocked(p.cfg.Key(c))
}

func (p *Pool[C, B]) warmLocked(c C) *class[C, B] {
	k := p.cfg.Key(c)
	wc := p.classes[k]
	if wc == nil {
		if len(p.classes) >= p.cfg.MaxClasses {
			var oldest string
			for k, wc := range p.classes {
				if oldest == "" || wc.lastUse.Before(p.classes[oldest].lastUse) {
					oldest = k
				}
			}
			p.dropLocked(oldest)
		}
		wc = &class[C, B]{class: c}
		p.classes[k] = wc
	}
	wc.lastUse = time.Now()
	return wc
}

func (p *Pool[C, B]) dropLocked(k string) {
	wc := p.classes[k]
	if wc == nil {
		return
	}
	for _, bx := range wc.idle {
		p.destroyLater(bx)
	}
	delete(p.classes, k)
}

// Take returns an idle sandbox of class c for which usable holds (nil: all
// are), destroying the unusable ones it meets; ok is false when there is
// none (the caller creates one). With refill, the class is refilled now.
func (p *Pool[C, B]) Take(c C, usable func(B) bool, refill bool) (bx B, ok bool, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return bx, false, ErrClosed
	}
	if p.cfg.Warm <= 0 {
		return bx, false, nil
	}
	wc := p.warmLocked(c)
	for !ok && len(wc.idle) > 0 {
		bx, wc.idle = wc.idle[0], wc.idle[1:]
		if ok = usable == nil || usable(bx); !ok {
			p.destroyLater(bx)
		}
	}
	if ok {
		p.hits++
	} else {
		p.misses++
	}
	wc.failures = 0
	if refill {
		p.refillLocked(p.cfg.Key(c))
	}
	return bx, ok, nil
}

// Refill starts creations until c's class has Warm sandboxes idle or
// starting, when it is warm.
func (p *Pool[C, B]) Refill(c C) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refillLocked(p.cfg.Key(c))
}

func (p *Pool[C, B]) refillLocked(k string) {
	wc := p.classes[k]
	if wc == nil || p.closed || wc.failures >= 3 {
		return
	}
	for len(wc.idle)+wc.starting < p.cfg.Warm {
		wc.starting++
		p.refills++
		p.bg.Add(1)
		go p.fill(k, wc)
	}
}

func (p *Pool[C, B]) fill(k string, wc *class[C, B]) {
	defer p.bg.Done()
	ctx, cancel := context.WithTimeout(context.Background(), p.cfg.CreateTimeout)
	bx, err := p.cfg.Create(ctx, wc.class)
	cancel()
	p.mu.Lock()
	defer p.mu.Unlock()
	wc.starting--
	if err != nil {
		wc.failures++
		p.cfg.CreateFailed(err)
		return
	}
	if p.closed || p.classes[k] != wc {
		p.destroyLater(bx)
		return
	}
	wc.failures = 0
	wc.idle = append(wc.idle, bx)
}

// Destroy removes bx in the background; Close waits for it.
func (p *Pool[C, B]) Destroy(bx B) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.destroyLater(bx)
}

func (p *Pool[C, B]) destroyLater(bx B) {
	p.bg.Add(1)
	go func() {
		defer p.bg.Done()
		p.cfg.Destroy(bx)
	}()
}

// Check drops the classes unused for idleTimeout and the idle sandboxes
// for which keep is false, lets failed classes try again and refills.
func (p *Pool[C, B]) Check(idleTimeout time.Duration, keep func(B) bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, wc := range p.classes {
		if time.Since(wc.lastUse) > idleTimeout {
			p.dropLocked(k)
			continue
		}
		kept := wc.idle[:0]
		for _, bx := range wc.idle {
			if keep(bx) {
				kept = append(kept, bx)
			} else {
				p.destroyLater(bx)
			}
		}
		wc.idle = kept
		wc.failures = 0
		p.refillLocked(k)
	}
}

// Idle counts the idle sandboxes of class c for which usable holds.
func (p *Pool[C, B]) Idle(c C, usable func(B) bool) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	if wc := p.classes[p.cfg.Key(c)]; wc != nil {
		for _, bx := range wc.idle {
			if usable(bx) {
				n++
			}
		}
	}
	return n
}

// Close destroys every idle sandbox and waits for the background work; it
// reports false when the pool was closed already.
func (p *Pool[C, B]) Close() bool {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return false
	}
	p.closed = true
	for k := range p.classes {
		p.dropLocked(k)
	}
	p.mu.Unlock()
	p.bg.Wait()
	return true
}

// Stats reports the pool as pool "sandbox" (RefillCPU is not measured):
// its size and target are Warm per warm class.
func (p *Pool[C, B]) Stats() sandbox.PoolStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := sandbox.PoolStats{Pool: "sandbox", Hits: p.hits, Misses: p.misses, Refills: p.refills}
	for _, wc := range p.classes {
		s.Size += p.cfg.Warm
		s.Ready += len(wc.idle)
		s.Starting += wc.starting
	}
	s.Target = s.Size
	return s
}

// Wait blocks until background creations and removals are done.
func (p *Pool[C, B]) Wait() { p.bg.Wait() }
