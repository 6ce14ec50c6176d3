package kernel

import (
	"cmp"
	"context"
	"sync"
)

// Interpreter is a stateful Python interpreter for one workspace: what
// the agent uses.
//
// Exec runs a cell in the interpreter's namespace, starting a kernel
// first when none runs. The cell's verdict (an exception, a timeout, the
// kernel's death) is in the Result, never an error; an error means the
// cell did not run (a kernel that cannot start, ErrInvalid, ctx ended
// while waiting for the cell before). When the kernel that ran the
// previous cells has ended, whatever the reason, the next Result says
// KernelRestarted with the RestartReason: state is never lost silently.
// Cells run one at a time, in the order Exec is called; cancelling ctx
// interrupts the cell like its timeout.
//
// Restart ends the kernel; the next Exec starts a fresh one and reports
// the restart ("restart"). Close ends the kernel for good. All methods are
// safe for concurrent use.
type Interpreter interface {
	Exec(ctx context.Context, c Cell) (Result, error)
	Restart(ctx context.Context) error
	Close() error
}

// Session is an Interpreter: a kernel for one workspace, started on the
// first cell and again after it ended.
type Session struct {
	opts   Options
	execMu sync.Mutex // one cell at a time

	mu      sync.Mutex
	k       *Kernel
	had     bool   // a kernel ran before
	lost    string // why the last kernel ended
	pending string // the restart the next cell reports ("" none)
	closed  bool
}

var _ Interpreter = (*Session)(nil)

// NewSession returns a session that starts its kernels with opts. It
// starts nothing yet.
func NewSession(opts Options) *Session { return &Session{opts: opts} }

// Exec implements Interpreter.
func (s *Session) Exec(ctx context.Context, c Cell) (Result, error) {
	s.execMu.Lock()
	defer s.execMu.Unlock()
	for attempt := 0; ; attempt++ {
		res, err := s.exec(ctx, c)
		// A kernel that ended between the check and the cell ran nothing
		// of it: the cell goes to a fresh kernel, which says why.
		if err != ErrEnded || attempt > 0 || ctx.Err() != nil || s.isClosed() {
			return res, err
		}
	}
}

func (s *Session) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

func (s *Session) exec(ctx context.Context, c Cell) (Result, error) {
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	k, err := s.ensure(ctx)
	if err != nil {
		return Result{}, err
	}
	res, err := k.Exec(ctx, c)
	if err != nil {
		return res, err
	}
	s.mu.Lock()
	res.KernelRestarted, res.RestartReason = s.pending != "", s.pending
	s.pending = ""
	s.mu.Unlock()
	return res, nil
}

// ensure returns the live kernel, starting one when none runs; a kernel
// that ran before and ended leaves its reason for the next cell to report.
// The caller holds execMu.
func (s *Session) ensure(ctx context.Context) (*Kernel, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, ErrEnded
	}
	k := s.k
	if k != nil && !k.Alive() {
		s.lost, s.k, k = k.EndReason(), nil, nil
	}
	if k != nil {
		s.mu.Unlock()
		return k, nil
	}
	if s.had && s.pending == "" {
		s.pending = cmp.Or(s.lost, "crash")
	}
	s.mu.Unlock()
	nk, err := Start(ctx, s.opts)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		nk.Close("closed")
		return nil, ErrEnded
	}
	s.k, s.had, s.lost = nk, true, ""
	return nk, nil
}

// Start starts the kernel now if none runs, so that the first cell need
// not wait for it (the repl calls it as it starts).
func (s *Session) Start(ctx context.Context) error {
	s.execMu.Lock()
	defer s.execMu.Unlock()
	_, err := s.ensure(ctx)
	return err
}

// stop ends the kernel, if one runs, for reason; the next cell reports
// it. It does not wait for a cell under way, which sees its kernel die.
func (s *Session) stop(reason string) bool {
	s.mu.Lock()
	k := s.k
	if k != nil {
		s.k, s.lost = nil, reason
	}
	s.mu.Unlock()
	if k == nil {
		return false
	}
	alive := k.Alive()
	k.Close(reason)
	return alive
}

// Restart implements Interpreter.
func (s *Session) Restart(context.Context) error {
	s.stop("restart")
	return nil
}

// Close implements Interpreter.
func (s *Session) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.stop("closed")
	return nil
}

// kernel returns the live kernel, or nil.
func (s *Session) kernel() *Kernel {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.k != nil && s.k.Alive() {
		return s.k
	}
	return nil
}

// Status returns the state of the session's kernel; Alive is false when
// none runs.
func (s *Session) Status() Status {
	if k := s.kernel(); k != nil {
		return k.Status()
	}
	return Status{}
}
