package backendkit

import (
	"context"
	"errors"

	"github.com/codeagent/codeagent/sandbox"
)

// RunChecked is a backend's Run around its execute: the spec is checked by
// validate (an invalid one is a StatusSandboxError result), and an error
// from execute is a *SetupError (other errors are wrapped in one named
// backend) reported in the result too.
func RunChecked(ctx context.Context, spec sandbox.Spec, backend string, validate func(sandbox.Spec) error,
	execute func(context.Context, sandbox.Spec, sandbox.Limits) (sandbox.Result, error)) (sandbox.Result, error) {
	if err := validate(spec); err != nil {
		return sandbox.Result{Status: sandbox.StatusSandboxError, Message: err.Error()}, err
	}
	res, err := execute(ctx, spec, spec.Limits.WithDefaults())
	if err != nil {
		var setup *sandbox.SetupError
		if !errors.As(err, &setup) {
			err = &sandbox.SetupError{Reason: backend, Err: err}
		}
		res.Status, res.Message = sandbox.StatusSandboxError, err.Error()
	}
	return res, err
}
