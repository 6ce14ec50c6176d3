package session

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/codeagent/codeagent/agent"
	"github.com/codeagent/codeagent/kernel"
	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/sandbox/ratelimit"
	"github.com/codeagent/codeagent/store"
)

// Lease timing: a run holds its session's lease for LeaseTTL and renews it
// every LeaseTTL/3; --wait polls every leasePoll.
const (
	LeaseTTL  = 30 * time.Second
	leasePoll = 250 * time.Millisecond
)

// Options describe one run for Start. The wiring is the same for the CLI
// (`codeagent run`), the server's runs and anything else that runs the
// agent on behalf of a session.
type Options struct {
	Store *store.Store
	// Session is the session the run is a turn of; nil runs outside any
	// session (still audited, named Label in the records, under a rate
	// limit of its own unless Bucket is given).
	Session *store.Session
	Label   string
	Task    string
	// Purpose names the holder in lease messages ("codeagent run").
	Purpose string
	// Wait waits for a session another process holds instead of failing
	// with a *store.LeaseHeldError; OnWait is told once who holds it.
	Wait   bool
	OnWait func(*store.LeaseHeldError)
	// Sandbox runs the programs; PerMinute bounds the session's
	// executions across every process of the store (default 10).
	Sandbox   sandbox.Sandbox
	PerMinute int
	// Bucket, when given, counts the run's executions with others' (an
	// MCP session's calls); else the session's, or the run's own.
	Bucket ratelimit.Bucket
	Logger *slog.Logger
}

// Run is one run under way: its turn, its audit recorder, and the sandbox
// it must use (rate-limited in the store, audited before each execution;
// closing it does not close Options.Sandbox).
// Its context ends when the run loses its session's lease.
type Run struct {
	ID      string
	Turn    store.Turn // zero outside a session
	History string     // the session's earlier turns, for the model
	Rec     *Recorder
	Sandbox sandbox.Sandbox

	st     *store.Store
	sess   *store.Session
	opts   Options
	begun  bool
	log    *slog.Logger
	lease  *store.Lease
	stop   context.CancelFunc
	ctx    context.Context
	cancel context.CancelCauseFunc
	done   chan struct{}

	kmu     sync.Mutex
	kernels []*kernel.Session // started by NewKernel
}

// Start takes the session's lease (waiting for it with o.Wait), marks the
// turns a dead process left running as interrupted, reads the earlier
// turns and prepares the run's recorder and sandbox; Begin then records
// the turn. Finish must follow Begin, Close a run that does not begin.
func Start(ctx context.Context, o Options) (*Run, error) {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Run{ID: NewRunID(), st: o.Store, sess: o.Session, opts: o, log: log, done: make(chan struct{})}
	r.ctx, r.cancel = context.WithCancelCause(ctx)
	sessName, turnID := o.Label, ""
	var bucket ratelimit.Bucket = ratelimit.NewMemoryBucket(o.PerMinute)
	if o.Session != nil {
		sessName, turnID = o.Session.Name, r.ID
		bucket = storeBucket{st: o.Store, key: "session:" + o.Session.ID, perMinute: ratelimit.PerMinute(o.PerMinute)}
	}
	if o.Bucket != nil {
		bucket = o.Bucket
	}
	r.Rec = NewRecorder(ctx, o.Store, sessName, turnID, r.ID, log)
	// Over the door's sandbox, in sandbox.Stack's order: an execution is
	// recorded once the limit admits it.
	r.Sandbox = sandbox.Stack(o.Sandbox, sandbox.Layers{
		RateLimit: func(next sandbox.Sandbox) sandbox.Sandbox { return ratelimit.NewShared(next, o.PerMinute, bucket) },
		Audit:     func(next sandbox.Sandbox) sandbox.Sandbox { return Audited(next, r.Rec) },
	})
	if o.Session == nil {
		close(r.done)
		return r, nil
	}
	l, err := acquire(ctx, o)
	if err != nil {
		return nil, err
	}
	r.lease = &l
	rctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	r.stop = stop
	go r.renew(rctx)
	// Holding the lease, no other process runs a turn here: what is still
	// marked running was left by one that died.
	if _, err := o.Store.InterruptRunning(ctx, *o.Session, "the process running it ended without finishing it"); err != nil {
		r.release()
		return nil, err
	}
	turns, err := o.Store.Turns(ctx, o.Session.ID)
	if err != nil {
		r.release()
		return nil, err
	}
	r.History = Summary(turns)
	return r, nil
}

// Begin records the turn (in a session) and returns the context the run
// must use: it ends when Start's context does or when the lease is lost.
func (r *Run) Begin(ctx context.Context) (context.Context, error) {
	if r.sess != nil {
		var err error
		if r.Turn, err = r.st.BeginTurnAs(ctx, r.ID, r.sess.ID, r.opts.Task); err != nil {
			return nil, err
		}
	}
	r.begun = true
	return r.ctx, nil
}

// acquire takes the session's lease, polling while o.Wait says so.
func acquire(ctx context.Context, o Options) (store.Lease, error) {
	told := false
	for {
		l, err := o.Store.AcquireLease(ctx, *o.Session, o.Purpose, LeaseTTL)
		var held *store.LeaseHeldError
		if !errors.As(err, &held) || !o.Wait {
			return l, err
		}
		if !told && o.OnWait != nil {
			o.OnWait(held)
			told = true
		}
		select {
		case <-ctx.Done():
			return store.Lease{}, fmt.Errorf("waiting for session %q: %w", o.Session.Name, context.Cause(ctx))
		case <-time.After(leasePoll):
		}
	}
}

// renew keeps the lease until Finish; losing it cancels the run.
func (r *Run) renew(ctx context.Context) {
	defer close(r.done)
	t := time.NewTicker(LeaseTTL / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		l, err := r.st.RenewLease(ctx, *r.lease, LeaseTTL)
		switch {
		case errors.Is(err, store.ErrLeaseLost):
			r.log.Error("lost the session's lease: stopping the run", "session", r.sess.Name)
			r.cancel(err)
			return
		case err != nil:
			r.log.Warn("renew the session's lease", "err", err) // it holds while this process lives
		default:
			*r.lease = l
		}
	}
}

// Close ends a run that never began (Begin was not called or failed):
// it releases the lease.
func (r *Run) Close() { r.release() }

// Finish records the end of the run: the turn's outcome (with the
// store's reserve when the disk is full, so that it does not stay
// running), the record that some audit records were lost if they were,
// and releases the lease. res may be nil when the agent never started;
// events, when given, are kept with the turn (the server shows them after
// a restart). The error says what could not be recorded.
func (r *Run) Finish(res *agent.Result, runErr error, dir string, events []agent.Event) error {
	defer r.release()
	ctx := context.WithoutCancel(r.ctx)
	errs := []error{}
	if lost := r.Rec.Err(); lost != nil {
		errs = append(errs, &AuditError{Err: lost})
	}
	if r.sess != nil && r.begun {
		t := r.Turn
		t.Status, t.Message = r.outcome(res, runErr)
		if res != nil {
			t.Code, t.Output, t.Attempts = res.Code, res.Output, res.Attempts
			t.InputTokens, t.OutputTokens = res.Usage.InputTokens, res.Usage.OutputTokens
			t.Artifacts = ArtifactRecords(dir, res.Artifacts)
			if events != nil {
				t.Result, _ = json.Marshal(res)
			}
		}
		t.ModelTime, t.SandboxTime = r.Rec.Totals()
		for _, e := range events {
			b, _ := json.Marshal(e)
			t.Events = append(t.Events, b)
		}
		if err := r.st.WithReserve(func() error { return r.st.FinishTurn(ctx, t) }); err != nil {
			errs = append(errs, fmt.Errorf("record the end of the turn: %w", err))
		}
	}
	if err := r.Rec.closeFailed(); err != nil {
		errs = append(errs, fmt.Errorf("record the loss of audit records: %w", err))
	}
	return errors.Join(errs...)
}

// outcome is the turn status Finish records for res and runErr.
func (r *Run) outcome(res *agent.Result, runErr error) (status, message string) {
	if lost := r.Rec.Err(); lost != nil {
		return store.TurnFailed, (&AuditError{Err: lost}).Error()
	}
	switch {
	case res != nil && res.Success:
		return store.TurnSucceeded, ""
	case r.ctx.Err() != nil:
		return store.TurnCanceled, "canceled: " + context.Cause(r.ctx).Error()
	case runErr != nil:
		return store.TurnFailed, runErr.Error()
	case res != nil:
		return store.TurnFailed, res.Message
	}
	return store.TurnFailed, ""
}

// Cause is why the run's context ended, or nil.
func (r *Run) Cause() error {
	if r.ctx.Err() == nil {
		return nil
	}
	return context.Cause(r.ctx)
}

func (r *Run) release() {
	r.closeKernels()
	if r.stop != nil {
		r.stop()
	}
	<-r.done
	r.stop = nil
	if r.lease != nil {
		if err := r.st.ReleaseLease(context.WithoutCancel(r.ctx), *r.lease); err != nil {
			r.log.Warn("release the session's lease", "err", err)
		}
		r.lease = nil
	}
	r.cancel(context.Canceled)
}

// NewRunID returns a fresh run ID for runs outside a session.
func NewRunID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// storeBucket is a rate limit's bucket kept in the store, shared by every
// process running the session.
type storeBucket struct {
	st        *store.Store
	key       string
	perMinute int
}

func (b storeBucket) Take(ctx context.Context, maxWait time.Duration) (ratelimit.Reservation, error) {
	wait, ok, err := b.st.TakeToken(ctx, b.key, b.perMinute, maxWait)
	if err != nil || !ok {
		return ratelimit.Reservation{Wait: wait}, err
	}
	return ratelimit.Reservation{OK: true, Wait: wait, Cancel: func() {
		_ = b.st.ReturnToken(context.WithoutCancel(ctx), b.key, b.perMinute)
	}}, nil
}
