package main

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"syscall"
)

// interrupt is the cause of the root context's end when a signal stops
// the process: commands see ctx.Err() == context.Canceled as for any
// cancellation, and exitInterrupted tells the two apart by the cause.
type interrupt struct{ sig syscall.Signal }

func (i interrupt) Error() string { return "interrupted by " + i.sig.String() }

// Unwrap makes an interrupt a cancellation for code that reads the cause.
func (i interrupt) Unwrap() error { return context.Canceled }

// signalContext returns a context that is canceled, with an interrupt as
// its cause, when SIGINT or SIGTERM arrives; later signals are ignored
// until stop, so that the command can clean up (stop its sandboxes).
func signalContext(parent context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(parent)
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-ch:
			sig, _ := s.(syscall.Signal)
			cancel(interrupt{sig})
		case <-done:
		}
	}()
	return ctx, func() {
		signal.Stop(ch)
		close(done)
		cancel(nil)
	}
}

// interruptedBy returns the signal that ended ctx, if one did.
func interruptedBy(ctx context.Context) (syscall.Signal, bool) {
	var i interrupt
	if ctx.Err() != nil && errors.As(context.Cause(ctx), &i) {
		return i.sig, true
	}
	return 0, false
}
