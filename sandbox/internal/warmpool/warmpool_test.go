package warmpool

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"
)

// fake counts creations and destructions of sandboxes named by numbers.
type fake struct {
	mu        sync.Mutex
	n         int
	destroyed map[int]bool
	fail      bool
}

func newFakePool(f *fake, warm int) *Pool[int, int] {
	f.destroyed = map[int]bool{}
	return New(Config[int, int]{
		Warm: warm, MaxClasses: 2, Key: strconv.Itoa, CreateTimeout: time.Second,
		Create: func(context.Context, int) (int, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.fail {
				return 0, errors.New("no")
			}
			f.n++
			return f.n, nil
		},
		Destroy: func(b int) {
			f.mu.Lock()
			f.destroyed[b] = true
			f.mu.Unlock()
		},
		CreateFailed: func(error) {},
	})
}

func TestTakeRefillsAndClose(t *testing.T) {
	f := &fake{}
	p := newFakePool(f, 2)
	p.Prime(1)
	p.Wait()
	if got := p.Idle(1, func(int) bool { return true }); got != 2 {
		t.Fatalf("idle after prime: %d, want 2", got)
	}
	// The first sandbox Take meets is unusable (the two were made
	// concurrently, in either order).
	first := 0
	b, ok, err := p.Take(1, func(b int) bool {
		if first == 0 {
			first = b
			return false
		}
		return true
	}, true)
	if err != nil || !ok || b == first {
		t.Fatalf("take: %d %v %v, want the other than %d (unusable)", b, ok, err, first)
	}
	p.Wait()
	if !f.destroyed[first] || p.Idle(1, func(int) bool { return true }) != 2 {
		t.Fatalf("the unusable sandbox was not destroyed or the class not refilled: %v", f.destroyed)
	}
	if _, ok, _ := p.Take(7, nil, false); ok { // a class never primed
		t.Fatal("a sandbox of a class never primed")
	}
	if s := p.Stats(); s.Pool != "sandbox" || s.Hits != 1 || s.Misses != 1 || s.Refills != uint64(f.n) || s.Ready != 2 || s.Size != 4 {
		t.Fatalf("stats %+v, want 1 hit, 1 miss, %d refills, 2 ready of 4 (two classes of 2)", s, f.n)
	}
	p.Prime(2)
	p.Prime(3) // a third class: the least recently used (1) goes
	p.Wait()
	if p.Idle(1, func(int) bool { return true }) != 0 {
		t.Fatal("class 1 was not evicted")
	}
	if !p.Close() || p.Close() {
		t.Fatal("Close reports wrongly whether it closed")
	}
	if _, _, err := p.Take(2, nil, false); !errors.Is(err, ErrClosed) {
		t.Fatalf("take after close: %v", err)
	}
	if len(f.destroyed) != f.n-1 { // all but the one taken
		t.Fatalf("%d of %d destroyed", len(f.destroyed), f.n)
	}
}

func TestFailuresPauseUntilCheck(t *testing.T) {
	f := &fake{fail: true}
	p := newFakePool(f, 1)
	for range 5 {
		p.Prime(1)
		p.Wait()
	}
	f.fail = false
	p.Refill(1)
	p.Wait()
	if p.Idle(1, func(int) bool { return true }) != 0 {
		t.Fatal("refilled after 3 failures without a check")
	}
	p.Check(time.Hour, func(int) bool { return true })
	p.Wait()
	if p.Idle(1, func(int) bool { return true }) != 1 {
		t.Fatal("Check did not let the class refill")
	}
	p.Close()
}
