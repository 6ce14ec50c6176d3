package docker

import (
	"context"
	"sync"
	"time"

	"github.com/moby/moby/client"
)

// oomWatch follows the engine's "oom" events for the pool's containers:
// the engine reports a memory-cgroup OOM kill of an exec'd process as an
// event, while the container (whose first process is untouched) keeps
// running and State.OOMKilled stays false.
type oomWatch struct {
	mu   sync.Mutex
	seen map[string]bool
	stop context.CancelFunc
	done chan struct{}
}

func (b *Backend) watchOOM(poolID string) *oomWatch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &oomWatch{seen: map[string]bool{}, stop: cancel, done: make(chan struct{})}
	ready := make(chan struct{})
	go func() {
		defer close(w.done)
		f := make(client.Filters).Add("type", "container").Add("event", "oom").Add("label", labelPool+"="+poolID)
		for first := true; ctx.Err() == nil; first = false {
			ev := b.cli.Events(ctx, client.EventsListOptions{Filters: f})
			if first {
				close(ready)
			}
		loop:
			for {
				select {
				case m := <-ev.Messages:
					w.mu.Lock()
					w.seen[m.Actor.ID] = true
					w.mu.Unlock()
				case err := <-ev.Err:
					if ctx.Err() == nil {
						b.log.Warn("docker: event stream", "err", err)
					}
					break loop
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}()
	<-ready
	return w
}

func (w *oomWatch) close() {
	w.stop()
	<-w.done
}

// oomKilled reports whether the container had an OOM kill, and forgets it.
// With wait (the program died of SIGKILL) it gives the event a moment to
// arrive.
func (b *Backend) oomKilled(id string, wait bool) bool {
	w := b.pool.oom
	deadline := time.Now().Add(250 * time.Millisecond)
	for {
		w.mu.Lock()
		hit := w.seen[id]
		delete(w.seen, id)
		w.mu.Unlock()
		if hit || !wait || time.Now().After(deadline) {
			return hit
		}
		time.Sleep(5 * time.Millisecond)
	}
}
