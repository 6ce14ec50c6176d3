package kernel

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sort"
	"sync"
	"time"
)

// DefaultIdleTimeout ends a kernel that ran no cell for this long.
const DefaultIdleTimeout = 10 * time.Minute

// ManagerConfig configures a Manager. Zero fields take the defaults.
type ManagerConfig struct {
	// Options are those of every kernel; Workspace is set per key.
	Options Options
	// Max bounds the live kernels (default 4 per CPU). When a cell needs
	// a kernel and Max are live, the least recently used idle kernel of
	// another key is ended (its next cell says restart_reason "evicted");
	// when none is idle, Exec fails with a *BusyError (HTTP 429).
	Max int
	// IdleTimeout ends a kernel that ran no cell for this long (default
	// DefaultIdleTimeout); its next cell says restart_reason "idle".
	IdleTimeout time.Duration
	Logger      *slog.Logger
}

// Key names a session's kernel: one kernel never serves two owners (API
// keys) or two sessions.
type Key struct{ Owner, Session string }

// BusyError says every kernel is busy and the cap is reached.
type BusyError struct {
	Max        int
	RetryAfter time.Duration
}

func (e *BusyError) Error() string {
	return fmt.Sprintf("all %d kernels are busy: try again in %s", e.Max, e.RetryAfter.Round(time.Second))
}

// ErrWorkspace is returned when a key's kernel is asked for with another
// workspace than the one it runs in.
var ErrWorkspace = errors.New("the kernel runs in another workspace")

type entry struct {
	key      Key
	ws       string
	s        *Session
	busy     int
	lastUsed time.Time
}

// Manager keeps one Session per Key: a server's kernels.
type Manager struct {
	cfg  ManagerConfig
	log  *slog.Logger
	stop chan struct{}
	done chan struct{}

	mu       sync.Mutex
	entries  map[Key]*entry
	closed   bool
	restarts map[string]uint64
	cells    uint64
}

// NewManager starts a manager (and its idle reaper).
func NewManager(cfg ManagerConfig) *Manager {
	if cfg.Max <= 0 {
		cfg.Max = 4 * runtime.NumCPU()
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := &Manager{cfg: cfg, log: log, stop: make(chan struct{}), done: make(chan struct{}),
		entries: map[Key]*entry{}, restarts: map[string]uint64{}}
	go m.reap()
	return m
}

// Exec runs c in key's kernel, which runs in workspace ws (a key keeps its
// workspace). See Interpreter.Exec.
func (m *Manager) Exec(ctx context.Context, key Key, ws string, c Cell) (Result, error) {
	e, victim, err := m.admit(key, ws)
	if err != nil {
		return Result{}, err
	}
	if victim != nil {
		victim.s.stop("evicted")
		m.mu.Lock()
		victim.busy--
		m.mu.Unlock()
	}
	res, err := e.s.Exec(ctx, c)
	m.mu.Lock()
	e.busy--
	e.lastUsed = time.Now()
	if err == nil {
		m.cells++
		if res.KernelRestarted {
			m.restarts[res.RestartReason]++
		}
	}
	m.mu.Unlock()
	return res, err
}

// admit returns key's entry, marked busy, and when a kernel must be made
// room for, the idle entry to stop first (marked busy too, so that it is
// neither chosen twice nor given a cell while it stops).
func (m *Manager) admit(key Key, ws string) (e, victim *entry, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, nil, ErrEnded
	}
	e = m.entries[key]
	if e == nil {
		e = &entry{key: key, ws: ws, s: NewSession(m.optionsFor(ws))}
		m.entries[key] = e
	}
	if e.ws != ws {
		return nil, nil, ErrWorkspace
	}
	if e.busy == 0 && e.s.kernel() == nil && m.liveLocked() >= m.cfg.Max {
		if victim = m.lruIdleLocked(key); victim == nil {
			return nil, nil, &BusyError{Max: m.cfg.Max, RetryAfter: 5 * time.Second}
		}
		victim.busy++
		m.log.Info("kernel evicted", "owner", victim.key.Owner, "session", victim.key.Session)
	}
	e.busy++
	e.lastUsed = time.Now()
	return e, victim, nil
}

func (m *Manager) optionsFor(ws string) Options {
	o := m.cfg.Options
	o.Workspace = ws
	return o
}

// liveLocked counts kernels that run or are about to (a cell waits).
func (m *Manager) liveLocked() int {
	n := 0
	for _, e := range m.entries {
		if e.busy > 0 || e.s.kernel() != nil {
			n++
		}
	}
	return n
}

func (m *Manager) lruIdleLocked(not Key) *entry {
	var best *entry
	for _, e := range m.entries {
		if e.key == not || e.busy > 0 || e.s.kernel() == nil {
			continue
		}
		if best == nil || e.lastUsed.Before(best.lastUsed) {
			best = e
		}
	}
	return best
}

// reap ends kernels idle for longer than IdleTimeout.
func (m *Manager) reap() {
	defer close(m.done)
	tick := time.NewTicker(min(max(m.cfg.IdleTimeout/4, 50*time.Millisecond), 30*time.Second))
	defer tick.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-tick.C:
		}
		m.mu.Lock()
		var idle []*entry
		for _, e := range m.entries {
			if e.busy == 0 && time.Since(e.lastUsed) > m.cfg.IdleTimeout && e.s.kernel() != nil {
				e.busy++
				idle = append(idle, e)
			}
		}
		m.mu.Unlock()
		for _, e := range idle {
			e.s.stop("idle")
			m.mu.Lock()
			e.busy--
			m.mu.Unlock()
		}
	}
}

// Restart ends key's kernel; the next cell starts a fresh one and says so.
// It reports whether a kernel was running.
func (m *Manager) Restart(key Key) bool {
	m.mu.Lock()
	e := m.entries[key]
	m.mu.Unlock()
	return e != nil && e.s.stop("restart")
}

// Forget ends key's kernel and forgets the key (its session was deleted).
func (m *Manager) Forget(key Key) {
	m.mu.Lock()
	e := m.entries[key]
	delete(m.entries, key)
	m.mu.Unlock()
	if e != nil {
		_ = e.s.Close()
	}
}

// Status returns the state of key's kernel (Alive false when none runs).
func (m *Manager) Status(key Key) (Status, bool) {
	m.mu.Lock()
	e := m.entries[key]
	m.mu.Unlock()
	if e == nil {
		return Status{}, false
	}
	return e.s.Status(), true
}

// Stats are the manager's figures for the metrics.
type Stats struct {
	Live, Busy, Max int
	MemoryBytes     int64 // all live kernels' memory
	RSSBytes        int64 // all live kernels' resident memory
	MaxRSSBytes     int64 // the largest kernel's
	MaxIdleRSSBytes int64 // the largest idle kernel's
	Cells           uint64
	Restarts        map[string]uint64
}

// Stats measures the live kernels.
func (m *Manager) Stats() Stats {
	m.mu.Lock()
	st := Stats{Max: m.cfg.Max, Cells: m.cells, Restarts: map[string]uint64{}}
	for r, n := range m.restarts {
		st.Restarts[r] = n
	}
	var sessions []*Session
	for _, e := range m.entries {
		sessions = append(sessions, e.s)
	}
	m.mu.Unlock()
	for _, s := range sessions {
		k := s.kernel()
		if k == nil {
			continue
		}
		ks := k.Status()
		st.Live++
		if ks.Busy {
			st.Busy++
		}
		st.MemoryBytes += ks.MemoryBytes
		st.RSSBytes += ks.RSSBytes
		st.MaxRSSBytes = max(st.MaxRSSBytes, ks.RSSBytes)
		if !ks.Busy {
			st.MaxIdleRSSBytes = max(st.MaxIdleRSSBytes, ks.RSSBytes)
		}
	}
	return st
}

// RestartReasons lists the reasons in st.Restarts, sorted.
func (st Stats) RestartReasons() []string {
	var out []string
	for r := range st.Restarts {
		out = append(out, r)
	}
	sort.Strings(out)
	return out
}

// Close ends every kernel and waits for them. The manager must not be
// used afterwards.
func (m *Manager) Close() {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	m.closed = true
	all := make([]*entry, 0, len(m.entries))
	for _, e := range m.entries {
		all = append(all, e)
	}
	m.mu.Unlock()
	close(m.stop)
	<-m.done
	var wg sync.WaitGroup
	for _, e := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = e.s.Close()
		}()
	}
	wg.Wait()
}
