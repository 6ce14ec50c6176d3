package kernel

import (
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

	mu     sync.Mutex
	k      *Kernel
	had    bool   // a kernel ran before
	lost   string // why the last kernel ended, for the next cell
	closed bool
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
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return Result{}, ErrEnded
	}
	k := s.k
	if k != nil && !k.Alive() {
		s.lost, s.k, k = k.EndReason(), nil, nil
	}
	restarted, reason := false, ""
	if k == nil {
		restarted, reason = s.had, s.lost
		if restarted && reason == "" {
			reason = "crash"
		}
		s.mu.Unlock()
		nk, err := Start(ctx, s.opts)
		if err != nil {
			return Result{}, err
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			nk.Close("closed")
			return Result{}, ErrEnded
		}
		s.k, s.had, s.lost, k = nk, true, "", nk
	}
	s.mu.Unlock()
	res, err := k.Exec(ctx, c)
	if err != nil {
		return res, err
	}
	res.KernelRestarted, res.RestartReason = restarted, reason
	return res, nil
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
