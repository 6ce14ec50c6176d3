package app

import (
	"sync"

	"github.com/codeagent/codeagent/safety"
	"github.com/codeagent/codeagent/sandbox"
)

// NewChecker builds a static checker of policy (nil: the default policy).
// It is the one place where codeagent makes checkers: the doors ask app
// for theirs (this, or Checkers.Open) and never call safety.New. An
// invalid policy is an error of class Invalid, "invalid policy: ...". The
// caller closes the checker.
func NewChecker(policy *safety.Policy) (*safety.Checker, error) {
	c, err := safety.New(policy)
	if err != nil {
		return nil, &Error{Class: Invalid, Code: "bad_request", Message: "invalid policy: " + err.Error(), Err: err}
	}
	return c, nil
}

// Checkers are a process's static checkers: Plain for programs without a
// network, and one for programs with a network, built on first use from
// Policy with the network allowed (the egress proxy decides the hosts),
// unless Net gives it. A door gives the checkers it was given, calls Open
// to have app build the rest, and Close when it is done.
type Checkers struct {
	Plain  *safety.Checker
	Net    *safety.Checker
	Policy func() (*safety.Policy, error)
	lazy   safety.Lazy

	mu  sync.Mutex
	own *safety.Checker // Plain, when Open built it
}

// Open makes Plain, when it is nil, a checker of policy (a nil function
// or a nil policy: the default policy), which Close closes; policy is
// called only then. Call it once, before For. Its error is policy's, or
// NewChecker's.
func (c *Checkers) Open(policy func() (*safety.Policy, error)) error {
	if c.Plain != nil {
		return nil
	}
	var p *safety.Policy
	if policy != nil {
		var err error
		if p, err = policy(); err != nil {
			return err
		}
	}
	chk, err := NewChecker(p)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.Plain, c.own = chk, chk
	c.mu.Unlock()
	return nil
}

// For is the checker of programs with network nw (nil: none).
func (c *Checkers) For(nw *sandbox.Network) (*safety.Checker, error) {
	switch {
	case nw == nil:
		return c.Plain, nil
	case c.Net != nil:
		return c.Net, nil
	}
	return c.lazy.Get(func() (*safety.Policy, error) {
		var p *safety.Policy
		if c.Policy != nil {
			var err error
			if p, err = c.Policy(); err != nil {
				return nil, err
			}
		}
		return p.WithNetwork(), nil
	})
}

// Close closes the checkers app built (Open's and For's); those the door
// gave are its own. Later calls do nothing.
func (c *Checkers) Close() {
	c.mu.Lock()
	if c.own != nil {
		c.own.Close()
		c.own = nil
	}
	c.mu.Unlock()
	c.lazy.Close()
}
