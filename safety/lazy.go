package safety

import (
	"errors"
	"sync"
)

// Lazy is a checker built the first time it is needed, then shared: the
// servers' checker for programs with a network, which most never need.
// The zero value is ready.
type Lazy struct {
	mu     sync.Mutex
	built  bool
	closed bool
	c      *Checker
	err    error
}

// Get returns the checker, built from policy() on the first call. After
// Close it returns an error.
func (l *Lazy) Get(policy func() (*Policy, error)) (*Checker, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, errors.New("safety: the checker is closed")
	}
	if !l.built {
		l.built = true
		p, err := policy()
		if err == nil {
			l.c, err = New(p)
		}
		l.err = err
	}
	return l.c, l.err
}

// Close frees the checker if it was built; later calls of Get fail.
func (l *Lazy) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	if l.c != nil {
		l.c.Close()
		l.c = nil
	}
}
