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
	want := map[int][]error{
		exitOK:       {nil},
		exitUsage:    {usagef("--file: missing"), app.Errorf(app.Invalid, "bad"), sandbox.ErrUnsafeWorkspace, &sandbox.SetupError{Reason: "x", Err: sandbox.ErrUnsafeWorkspace}},
		exitSandbox:  {&sandbox.SetupError{Reason: "no cgroup"}},
		exitBusy:     {&store.LeaseHeldError{Session: "s"}},
		exitProvider: {&llm.Error{Message: "refused"}},
		exitFailure:  {store.ErrNotFound, errors.New("something")},
	}
	for code, errs := range want {
		for _, err := range errs {
			for _, e := range []error{err, wrapNonNil(err)} {
				if got := exitCodeFor(io.Discard, e); got != code {
					t.Errorf("exitCodeFor(%v) = %d, want %d", e, got, code)
				}
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
