//go:build linux && (amd64 || arm64)

package namespace

import (
	"github.com/codeagent/codeagent/sandbox"
)

// The pool keeps Config.Warm launchers ready for the command most recently
// run: a caller such as the agent or a server runs the same command
// (python3 /workspace/solution.py) over and over. A spec with another
// command gets a launcher started on demand, and the pool switches to it.

// launcher returns a warm launcher for spec when one is ready, else starts
// one.
func (b *Backend) launcher(spec sandbox.Spec) (*launcher, error) {
	if b.cfg.Warm <= 0 {
		return b.newLauncher(spec)
	}
	key := b.launcherKey(spec)
	b.mu.Lock()
	var l *launcher
	if b.poolKey == key && len(b.pool) > 0 {
		l = b.pool[0]
		b.pool = b.pool[1:]
		b.poolStats.Hits++
	} else {
		b.poolStats.Misses++
	}
	var stale []*launcher
	if b.poolKey != key {
		stale, b.pool, b.poolKey = b.pool, nil, key
	}
	b.mu.Unlock()
	for _, s := range stale {
		b.background(s.discard)
	}
	if l != nil {
		return l, nil
	}
	return b.newLauncher(spec)
}

// release disposes of a used launcher and refills the pool, in the
// background: removing a cgroup and starting a launcher (whose move into its
// cgroup blocks every fork on the host for an RCU grace period) are kept out
// of the execution and out of its start.
func (b *Backend) release(l *launcher, spec sandbox.Spec) {
	b.background(func() {
		l.discard()
		if b.cfg.Warm > 0 {
			b.refill(spec)
		}
	})
}

func (b *Backend) background(fn func()) {
	b.bg.Add(1)
	go func() {
		defer b.bg.Done()
		fn()
	}()
}

// refill starts launchers for spec until the pool is full.
func (b *Backend) refill(spec sandbox.Spec) {
	key := b.launcherKey(spec)
	for {
		b.mu.Lock()
		full := b.closed || b.poolKey != key || len(b.pool)+b.starting >= b.cfg.Warm
		if !full {
			b.starting++
			b.poolStats.Refills++
		}
		b.mu.Unlock()
		if full {
			return
		}
		l, err := b.newLauncher(spec)
		b.mu.Lock()
		b.starting--
		keep := err == nil && !b.closed && b.poolKey == key
		if keep {
			b.pool = append(b.pool, l)
		}
		b.mu.Unlock()
		if err != nil {
			b.log.Warn("start warm sandbox", "err", err)
			return
		}
		if !keep {
			l.discard()
			return
		}
	}
}

// PoolStats implements sandbox.Pools: the warm launchers (Config.Warm)
// and the warm interpreters (Config.WarmPython), those in use.
func (b *Backend) PoolStats() []sandbox.PoolStats {
	var out []sandbox.PoolStats
	if b.cfg.Warm > 0 {
		b.mu.Lock()
		s := b.poolStats
		s.Pool, s.Size, s.Target, s.Ready, s.Starting = "sandbox", b.cfg.Warm, b.cfg.Warm, len(b.pool), b.starting
		b.mu.Unlock()
		out = append(out, s)
	}
	if b.warm != nil {
		out = append(out, b.warm.Stats())
	}
	return out
}

// Close stops the warm launchers and removes the backend's files. The
// backend must not be used afterwards.
func (b *Backend) Close() error {
	b.mu.Lock()
	b.closed = true
	pool := b.pool
	b.pool = nil
	b.mu.Unlock()
	for _, l := range pool {
		l.discard()
	}
	if b.warm != nil {
		b.warm.Close()
	}
	b.bg.Wait()
	return b.removeFiles()
}
