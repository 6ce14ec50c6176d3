package kubernetes

import (
	"context"
	"errors"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/sandbox/internal/warmpool"
)

// maxClasses bounds how many limits classes are kept warm at once.
const maxClasses = 4

// pool keeps Config.Warm armed, idle Pods per limits class (package
// warmpool). A Pod is taken for one execution and deleted afterwards; the
// pool refills in the background. Its loop renews the backend's Lease,
// drops idle Pods whose streams ended (a Pod deleted behind codeagent's
// back, an API server restart) or that near their deadline, and classes
// unused for Config.IdleTimeout.
type pool struct {
	b        *Backend
	wp       *warmpool.Pool[class, *box]
	stop     chan struct{}
	loopDone chan struct{}
}

func newPool(b *Backend) *pool {
	p := &pool{b: b, stop: make(chan struct{}), loopDone: make(chan struct{})}
	p.wp = warmpool.New(warmpool.Config[class, *box]{
		Warm: b.cfg.Warm, MaxClasses: maxClasses, Key: class.key,
		Create: b.createBox, CreateTimeout: b.cfg.StartTimeout, Destroy: b.destroy,
		CreateFailed: func(err error) { b.log.Warn("kubernetes: start a warm Pod", "err", err) },
	})
	go p.loop()
	return p
}

func (p *pool) prime(c class) { p.wp.Prime(c) }

// take returns an armed box of class c: an idle one when there is one,
// else one created now (the cold path). The class is refilled at once.
func (p *pool) take(ctx context.Context, c class) (*box, error) {
	bx, ok, err := p.wp.Take(c, func(bx *box) bool { return !bx.dead() }, true)
	if err != nil || ok {
		return bx, err
	}
	ctx, cancel := context.WithTimeout(ctx, p.b.cfg.StartTimeout)
	defer cancel()
	return p.b.createBox(ctx, c)
}

// release deletes a used box in the background; the class was refilled
// when it was taken.
func (p *pool) release(bx *box) { p.wp.Destroy(bx) }

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
	margin := min(2*time.Minute, p.b.cfg.PodLifetime/4)
	p.wp.Check(p.b.cfg.IdleTimeout, func(bx *box) bool {
		if bx.dead() {
			p.b.log.Warn("kubernetes: replacing a warm Pod that ended or lost its streams", "pod", bx.name)
			return false
		}
		return time.Since(bx.start) <= p.b.cfg.PodLifetime-margin
	})
}

// close deletes every Pod of the pool and waits for the background work.
func (p *pool) close() error {
	select {
	case <-p.stop:
		return nil
	default:
	}
	close(p.stop)
	<-p.loopDone
	if !p.wp.Close() {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), apiTimeout)
	defer cancel()
	var errs []error
	list, err := p.b.api.pods(p.b.cfg.Namespace).List(ctx, metav1.ListOptions{LabelSelector: labelPool + "=" + p.b.id})
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

func (p *pool) wait() { p.wp.Wait() }

// PoolStats implements sandbox.Pools: the Pods started ahead.
func (b *Backend) PoolStats() []sandbox.PoolStats {
	if b.pool == nil || b.cfg.Warm <= 0 {
		return nil
	}
	return []sandbox.PoolStats{b.pool.wp.Stats()}
}
