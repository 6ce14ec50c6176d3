package main

import (
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/codeagent/codeagent/app"
	"github.com/codeagent/codeagent/llm"
	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/store"
)

// TestExitCodeForClasses: each error class ends a command with the status
// its -h documents, also wrapped in the command's context.
func TestExitCodeForClasses(t *testing.T) {
	for _, c := range []struct {
		err  error
		want int
	}{
		{nil, exitOK},
		{usagef("--file: missing"), exitUsage},
		{app.Errorf(app.Invalid, "bad"), exitUsage},
		{sandbox.ErrUnsafeWorkspace, exitUsage},
		{&sandbox.SetupError{Reason: "x", Err: sandbox.ErrUnsafeWorkspace}, exitUsage},
		{&sandbox.SetupError{Reason: "no cgroup"}, exitSandbox},
		{&store.LeaseHeldError{Session: "s"}, exitBusy},
		{&llm.Error{Message: "refused"}, exitProvider},
		{store.ErrNotFound, exitFailure},
		{errors.New("something"), exitFailure},
	} {
		for _, err := range []error{c.err, wrapNonNil(c.err)} {
			if got := exitCodeFor(io.Discard, err); got != c.want {
				t.Errorf("exitCodeFor(%v) = %d, want %d", err, got, c.want)
			}
		}
	}
}

func wrapNonNil(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("run: %w", err)
}
