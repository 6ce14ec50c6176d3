package backends

import (
	"context"
	"errors"
	"testing"

	"github.com/codeagent/codeagent/egress"
	"github.com/codeagent/codeagent/sandbox"
)

type okSandbox struct{ runs int }

func (o *okSandbox) Run(context.Context, sandbox.Spec) (sandbox.Result, error) {
	o.runs++
	return sandbox.Result{Status: sandbox.StatusOK}, nil
}
func (o *okSandbox) Close() error { return nil }

// TestNoNetworkRefusesAllowLists: a backend without the egress gateway
// refuses a Spec with a network, through egress.Wrap as Open builds it,
// and runs the others.
func TestNoNetworkRefusesAllowLists(t *testing.T) {
	inner := &okSandbox{}
	sb := egress.Wrap(noNetwork{inner, "kubernetes"})
	_, err := sb.Run(context.Background(), sandbox.Spec{Command: []string{"true"}, Network: &sandbox.Network{Allow: []string{"api.test"}}})
	if !errors.Is(err, sandbox.ErrInvalidSpec) || inner.runs != 0 {
		t.Fatalf("with a network: %v, %d runs", err, inner.runs)
	}
	if _, err := sb.Run(context.Background(), sandbox.Spec{Command: []string{"true"}}); err != nil || inner.runs != 1 {
		t.Fatalf("without: %v, %d runs", err, inner.runs)
	}
}
