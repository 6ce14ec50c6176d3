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
	tp.Pool = NewPool(PoolConfig[*fake]{Size: size,
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

func TestPoolTakeRunsColdUntilFilled(t *testing.T) {
	p := newTestPool(2)
	if _, ok := p.Take(); ok {
		t.Fatal("an empty pool handed out an interpreter")
	}
	p.bg.Wait()
	if n := p.count(); n != 2 {
		t.Fatalf("Take started %d interpreters, want the pool's size 2", n)
	}
	a, ok1 := p.Take()
	b, ok2 := p.Take()
	if !ok1 || !ok2 || a == b {
		t.Fatalf("two takes from a full pool: %v %v", ok1, ok2)
	}
	if a.id != 0 || b.id != 1 {
		t.Errorf("taken out of order: %d %d", a.id, b.id)
	}
	if _, ok := p.Take(); ok {
		t.Fatal("a drained pool handed out an interpreter")
	}
	p.bg.Wait()
	if n := p.count(); n != 4 {
		t.Fatalf("the drained pool refilled to %d started, want 4", n)
	}
	p.Fill() // full: starts nothing
	p.bg.Wait()
	if n := p.count(); n != 4 {
		t.Fatalf("Fill of a full pool started more: %d", n)
	}
}

func TestPoolDiscardsExitedAndOld(t *testing.T) {
	p := newTestPool(2)
	p.Fill()
	p.bg.Wait()
	first := p.started[0]
	first.exited.Store(true)
	w, ok := p.Take()
	if !ok || w == first {
		t.Fatalf("Take handed out an exited interpreter (%v)", ok)
	}
	p.bg.Wait()
	if first.discarded.Load() != 1 {
		t.Errorf("the exited interpreter was discarded %d times", first.discarded.Load())
	}
	p.Fill() // as after an execution
	p.bg.Wait()
	if n := p.count(); n != 4 {
		t.Fatalf("%d started, want 4", n)
	}
	// Everything ready now is too old.
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
	p.mu.Lock()
	ready := len(p.ready)
	p.mu.Unlock()
	if n := p.count(); n != 6 || ready != 2 {
		t.Errorf("%d started and %d ready after the refill, want 6 and 2", n, ready)
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
	p.Fill()
	p.bg.Wait()
	if n := p.count(); n != 2 {
		t.Fatalf("a closed pool started %d more", n-2)
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
