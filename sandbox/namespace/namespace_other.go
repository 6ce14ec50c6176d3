//go:build !linux || !(amd64 || arm64)

package namespace

import (
	"context"
	"errors"
	"runtime"

	"github.com/codeagent/codeagent/sandbox"
)

// Backend is unavailable on this platform.
type Backend struct{}

var _ sandbox.Sandbox = (*Backend)(nil)

var errUnsupported = errors.New("the namespace sandbox needs Linux on amd64 or arm64, not " + runtime.GOOS + "/" + runtime.GOARCH)

// New reports that the backend is unsupported here.
func New(Config) (*Backend, error) {
	return nil, &sandbox.SetupError{Reason: "unsupported platform", Err: errUnsupported}
}

// Run reports that the backend is unsupported here.
func (*Backend) Run(context.Context, sandbox.Spec) (sandbox.Result, error) {
	return sandbox.Result{Status: sandbox.StatusSandboxError}, &sandbox.SetupError{Reason: "unsupported platform", Err: errUnsupported}
}

// Close does nothing.
func (*Backend) Close() error { return nil }

// Probe reports that nothing is available on this platform.
func Probe(Config) Report {
	return Report{Problems: []string{errUnsupported.Error()}}
}
