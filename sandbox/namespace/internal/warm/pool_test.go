package warm

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fake is an interpreter that is only counted.
type fake struct {
	id        int
	exited    atomic.Bool
	discarded atomic.Int32
}

func (f *fake) Exited() bool { return f.exited.Load() }
func (f *fake) Discard()     { f.discarded.Add(1) }

const fakeStartCPU = 10 * time.Millisecond

func (f *fake) StartCPU() time.Duration { return fakeStartCPU }

// testPool is a pool of fakes whose background work the test waits for.
type testPool struct {
	*Pool[*fake]
	bg      sync.WaitGroup
	mu      sync.Mutex
	started []*fake
	fail    atomic.Bool
}

func newTestPool(size int) *testPool {
	tp := &testPool{}
	tp.Pool = NewPool(PoolConfig[*fake]{Size: size, Starting: 1,
		Start: func() (*fake, error) {
			if tp.fail.Load() {
				return nil, errors.New("warm-up failed")
			}
			tp.mu.Lock()
			defer tp.mu.Unlock()
			f := &fake{id: len(tp.started)}
			tp.started = append(tp.started, f)
			return f, nil
		},
		Background: func(fn func()) {
			tp.bg.Add(1)
			go func() {
				defer tp.bg.Done()
				fn()
			}()
		}})
	return tp
}

func (tp *testPool) count() int {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return len(tp.started)
}

// TestPoolFollowsDemand: the pool keeps as many interpreters ready as were
// asked for within demandWindow (one at first, at most its size), starts
// them one at a time, counts hits, misses, refills and their CPU, and
// shrinks back to one once the demand is over.
func TestPoolFollowsDemand(t *testing.T) {
	p := newTestPool(3)
	if _, ok := p.Take(); ok {
		t.Fatal("an empty pool handed out an interpreter")
	}
	p.bg.Wait()
	if n := p.count(); n != 1 {
		t.Fatalf("the first Take started %d interpreters, want 1 (one asked for)", n)
	}
	if _, ok := p.Take(); !ok {
		t.Fatal("no interpreter after the refill")
	}
	p.Fill() // as after the execution
	p.bg.Wait()
	if n, s := p.count(), p.Stats(); n != 3 || s.Ready != 2 || s.Target != 2 {
		t.Fatalf("after two takes: %d started, %+v; want 3 started, 2 ready for a demand of 2", n, s)
	}
	for range 3 {
		p.Take()
	}
	p.Fill()
	p.bg.Wait()
	s := p.Stats()
	if s.Target != 3 || s.Ready != 3 || s.Hits != 3 || s.Misses != 2 || s.Refills != uint64(p.count()) || s.RefillCPU != time.Duration(p.count())*fakeStartCPU {
		t.Fatalf("after five takes: %+v, %d started; want 3 ready (the size), 3 hits, 2 misses, every start counted with its CPU", s, p.count())
	}
	// The demand is over: a trim leaves one.
	p.now = func() time.Time { return time.Now().Add(2 * demandWindow) }
	p.trim()
	p.bg.Wait()
	if s := p.Stats(); s.Ready != 1 || s.Target != 1 {
		t.Fatalf("an idle pool kept %d ready (target %d), want 1", s.Ready, s.Target)
	}
	discarded := 0
	for _, f := range p.started {
		discarded += int(f.discarded.Load())
	}
	if discarded != 2 {
		t.Fatalf("the trim discarded %d interpreters, want 2", discarded)
	}
}

// TestPoolStartsAFewAtATime: however large the demand, no more than
// Starting warm-ups run at once.
func TestPoolStartsAFewAtATime(t *testing.T) {
	var running, most atomic.Int32
	var bg sync.WaitGroup
	p := NewPool(PoolConfig[*fake]{Size: 6, Starting: 2,
		Start: func() (*fake, error) {
			n := running.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			time.Sleep(5 * time.Millisecond)
			running.Add(-1)
			return &fake{}, nil
		},
		Background: func(fn func()) { bg.Add(1); go func() { defer bg.Done(); fn() }() }})
	for range 6 {
		p.Take()
	}
	bg.Wait()
	if m := most.Load(); m != 2 {
		t.Fatalf("%d warm-ups ran at once, want Starting's 2", m)
	}
	if s := p.Stats(); s.Ready != 6 {
		t.Fatalf("%d ready after a demand of 6, want 6", s.Ready)
	}
}

func TestSizeFor(t *testing.T) {
	for _, c := range []struct {
		cpus int
		mem  int64
		want int
	}{{2, 23 << 30, 2}, {64, 256 << 30, 64}, {64, 8 << 30, 4}, {8, 1 << 30, 1}, {1, 0, 1}} {
		if got := SizeFor(c.cpus, c.mem); got != c.want {
			t.Errorf("SizeFor(%d, %d) = %d, want %d", c.cpus, c.mem, got, c.want)
		}
	}
}

func TestPoolDiscardsExitedAndOld(t *testing.T) {
	p := newTestPool(2)
	p.Fill()
	p.bg.Wait()
	first := p.started[0]
	first.exited.Store(true)
	if _, ok := p.Take(); ok {
		t.Fatal("Take handed out an exited interpreter")
	}
	p.bg.Wait()
	if first.discarded.Load() != 1 {
		t.Errorf("the exited interpreter was discarded %d times", first.discarded.Load())
	}
	w, ok := p.Take()
	if !ok || w == first {
		t.Fatalf("no interpreter after the refill (%v)", ok)
	}
	p.Fill()
	p.bg.Wait()
	if n := p.count(); n != 4 {
		t.Fatalf("%d started, want 4 (two asked for)", n)
	}
	// Everything ready now is too old (and the demand long past).
	p.now = func() time.Time { return time.Now().Add(maxAge) }
	if _, ok := p.Take(); ok {
		t.Fatal("Take handed out an interpreter older than maxAge")
	}
	p.bg.Wait()
	for _, f := range p.started[2:4] {
		if f.discarded.Load() != 1 {
			t.Errorf("old interpreter %d discarded %d times", f.id, f.discarded.Load())
		}
	}
	if n, s := p.count(), p.Stats(); n != 5 || s.Ready != 1 {
		t.Errorf("%d started and %d ready after the refill, want 5 and 1", n, s.Ready)
	}
	if w.discarded.Load() != 0 {
		t.Error("the pool discarded an interpreter it handed out")
	}
}

func TestPoolStopsAfterFailures(t *testing.T) {
	p := newTestPool(1)
	p.fail.Store(true)
	for range maxFailures {
		if _, ok := p.Take(); ok {
			t.Fatal("a failing pool handed out an interpreter")
		}
		p.bg.Wait()
	}
	p.fail.Store(false)
	p.Fill()
	p.Take()
	p.bg.Wait()
	if n := p.count(); n != 0 {
		t.Fatalf("the pool started %d interpreters after %d failed warm-ups", n, maxFailures)
	}
}

func TestPoolFailuresResetBySuccess(t *testing.T) {
	p := newTestPool(1)
	// Fewer failures than the bound, then a success, twice: without the
	// reset, the second round's failures would stop the pool.
	for _, round := range []string{"a success after fewer failures than the bound did not fill the pool",
		"failures before a success still counted"} {
		p.fail.Store(true)
		for range maxFailures - 1 {
			p.Fill()
			p.bg.Wait()
		}
		p.fail.Store(false)
		p.Fill()
		p.bg.Wait()
		if _, ok := p.Take(); !ok {
			t.Fatal(round)
		}
	}
}

func TestPoolClose(t *testing.T) {
	p := newTestPool(2)
	p.Fill()
	p.bg.Wait()
	p.Close()
	for _, f := range p.started {
		if f.discarded.Load() != 1 {
			t.Errorf("Close discarded interpreter %d %d times", f.id, f.discarded.Load())
		}
	}
	if _, ok := p.Take(); ok {
		t.Fatal("a closed pool handed out an interpreter")
	}
	before := p.count()
	p.Fill()
	p.bg.Wait()
	if n := p.count(); n != before {
		t.Fatalf("a closed pool started %d more", n-before)
	}
}

func TestPoolCloseDiscardsThoseStarting(t *testing.T) {
	release := make(chan struct{})
	var bg sync.WaitGroup
	var made []*fake
	var mu sync.Mutex
	p := NewPool(PoolConfig[*fake]{Size: 1,
		Start: func() (*fake, error) {
			<-release
			f := &fake{}
			mu.Lock()
			made = append(made, f)
			mu.Unlock()
			return f, nil
		},
		Background: func(fn func()) { bg.Add(1); go func() { defer bg.Done(); fn() }() }})
	p.Fill()
	p.Close()
	close(release)
	bg.Wait()
	if len(made) != 1 || made[0].discarded.Load() != 1 {
		t.Fatalf("an interpreter ready after Close was not discarded: %d made", len(made))
	}
}

func TestPoolRuns(t *testing.T) {
	p := newTestPool(1)
	if p.Runs() != 0 {
		t.Fatal("a new pool counts runs")
	}
	p.Ran()
	p.Ran()
	if n := p.Runs(); n != 2 {
		t.Fatalf("Runs = %d, want 2", n)
	}
}
