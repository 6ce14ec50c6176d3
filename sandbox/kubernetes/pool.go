package kubernetes

import (
	"context"
	"errors"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// maxClasses bounds how many limits classes are kept warm at once.
const maxClasses = 4

// pool keeps Config.Warm armed, idle Pods per limits class. A Pod is taken
// for one execution and deleted afterwards; the pool refills in the
// background. Its loop renews the backend's Lease, drops idle Pods whose
// streams ended (a Pod deleted behind codeagent's back, an API server
// restart) or that near their deadline, and classes unused for
// Config.IdleTimeout.
type pool struct {
	b        *Backend
	mu       sync.Mutex
	classes  map[string]*warmClass
	closed   bool
	bg       sync.WaitGroup
	stop     chan struct{}
	loopDone chan struct{}
}

type warmClass struct {
	class    class
	idle     []*box
	starting int
	lastUse  time.Time
	failures int // consecutive failed creations; refills pause after 3 until the next check
}

func newPool(b *Backend) *pool {
	p := &pool{b: b, classes: map[string]*warmClass{}, stop: make(chan struct{}), loopDone: make(chan struct{})}
	go p.loop()
	return p
}

func (p *pool) prime(c class) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.warmLocked(c)
	p.refillLocked(c.key())
}

func (p *pool) warmLocked(c class) *warmClass {
	k := c.key()
	wc := p.classes[k]
	if wc == nil {
		if len(p.classes) >= maxClasses {
			var oldest string
			for k, wc := range p.classes {
				if oldest == "" || wc.lastUse.Before(p.classes[oldest].lastUse) {
					oldest = k
				}
			}
			p.dropLocked(oldest)
		}
		wc = &warmClass{class: c}
		p.classes[k] = wc
	}
	wc.lastUse = time.Now()
	return wc
}

func (p *pool) dropLocked(k string) {
	wc := p.classes[k]
	if wc == nil {
		return
	}
	for _, bx := range wc.idle {
		p.destroyLater(bx)
	}
	delete(p.classes, k)
}

// take returns an armed box of class c: an idle one when there is one,
// else one created now (the cold path).
func (p *pool) take(ctx context.Context, c class) (*box, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, errors.New("backend closed")
	}
	var bx *box
	if p.b.cfg.Warm > 0 {
		wc := p.warmLocked(c)
		for bx == nil && len(wc.idle) > 0 {
			bx, wc.idle = wc.idle[0], wc.idle[1:]
			if bx.dead() {
				p.destroyLater(bx)
				bx = nil
			}
		}
		wc.failures = 0
		p.refillLocked(c.key())
	}
	p.mu.Unlock()
	if bx != nil {
		return bx, nil
	}
	ctx, cancel := context.WithTimeout(ctx, p.b.cfg.StartTimeout)
	defer cancel()
	return p.b.createBox(ctx, c)
}

func (p *pool) refillLocked(k string) {
	wc := p.classes[k]
	if wc == nil || p.closed || wc.failures >= 3 {
		return
	}
	for len(wc.idle)+wc.starting < p.b.cfg.Warm {
		wc.starting++
		p.bg.Add(1)
		go p.fill(k, wc)
	}
}

func (p *pool) fill(k string, wc *warmClass) {
	defer p.bg.Done()
	ctx, cancel := context.WithTimeout(context.Background(), p.b.cfg.StartTimeout)
	bx, err := p.b.createBox(ctx, wc.class)
	cancel()
	p.mu.Lock()
	defer p.mu.Unlock()
	wc.starting--
	if err != nil {
		wc.failures++
		p.b.log.Warn("kubernetes: start a warm Pod", "err", err)
		return
	}
	if p.closed || p.classes[k] != wc {
		p.destroyLater(bx)
		return
	}
	wc.failures = 0
	wc.idle = append(wc.idle, bx)
}

// release deletes a used box in the background; the class was refilled
// when it was taken.
func (p *pool) release(bx *box) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.destroyLater(bx)
}

func (p *pool) destroyLater(bx *box) {
	p.bg.Add(1)
	go func() {
		defer p.bg.Done()
		p.b.destroy(bx)
	}()
}

func (p *pool) loop() {
	defer close(p.loopDone)
	t := time.NewTicker(p.b.cfg.CheckInterval)
	defer t.Stop()
	renewed := time.Now()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			if time.Since(renewed) >= leaseDuration/3 {
				ctx, cancel := context.WithTimeout(context.Background(), apiTimeout)
				if err := p.b.renewLease(ctx); err != nil {
					p.b.log.Warn("kubernetes: renew the Lease", "err", err)
				} else {
					renewed = time.Now()
				}
				cancel()
			}
			p.check()
		}
	}
}

// check replaces idle boxes that died or near their deadline, drops unused
// classes and lets failed classes try again.
func (p *pool) check() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, wc := range p.classes {
		if time.Since(wc.lastUse) > p.b.cfg.IdleTimeout {
			p.dropLocked(k)
			continue
		}
		keep := wc.idle[:0]
		for _, bx := range wc.idle {
			if bx.dead() || time.Since(bx.start) > p.b.cfg.PodLifetime-min(2*time.Minute, p.b.cfg.PodLifetime/4) {
				if bx.dead() {
					p.b.log.Warn("kubernetes: replacing a warm Pod that ended or lost its streams", "pod", bx.name)
				}
				p.destroyLater(bx)
				continue
			}
			keep = append(keep, bx)
		}
		wc.idle = keep
		wc.failures = 0
		p.refillLocked(k)
	}
}

// close deletes every Pod of the pool and waits for the background work.
func (p *pool) close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	for k := range p.classes {
		p.dropLocked(k)
	}
	p.mu.Unlock()
	close(p.stop)
	<-p.loopDone
	p.bg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), apiTimeout)
	defer cancel()
	var errs []error
	list, err := p.b.cs.CoreV1().Pods(p.b.cfg.Namespace).List(ctx, metav1.ListOptions{LabelSelector: labelPool + "=" + p.b.id})
	if err != nil {
		errs = append(errs, err)
	} else {
		for _, pod := range list.Items {
			if err := p.b.deletePod(ctx, pod.Name); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

func (p *pool) wait() { p.bg.Wait() }
