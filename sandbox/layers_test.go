package sandbox

import (
	"context"
	"errors"
	"slices"
	"testing"
)

// trace is a sandbox that notes its name in the trace as an execution
// passes it; refuse stops the execution there.
type trace struct {
	name   string
	next   Sandbox
	log    *[]string
	refuse bool
}

var errRefused = errors.New("refused")

func (t *trace) Run(ctx context.Context, spec Spec) (Result, error) {
	*t.log = append(*t.log, t.name)
	if t.refuse {
		return Result{}, errRefused
	}
	if t.next == nil {
		return Result{Status: StatusOK}, nil
	}
	return t.next.Run(ctx, spec)
}

func (t *trace) Close() error { return nil }

func traced(name string, log *[]string, refuse bool) Layer {
	return func(next Sandbox) Sandbox { return &trace{name: name, next: next, log: log, refuse: refuse} }
}

// TestStackOrder: an execution passes the rate limit, then the audit, then
// the queue, then the egress proxy, then the backend, whether the layers
// are stacked at once or as a process and its runs add them (egress when
// the backend opens, the queue once, rate limit and audit per run); a
// layer left out is skipped; and an execution the rate limit refuses
// reaches nothing under it.
func TestStackOrder(t *testing.T) {
	var log []string
	backend := &trace{name: "backend", log: &log}
	all := Layers{RateLimit: traced("rate limit", &log, false), Audit: traced("audit", &log, false),
		Queue: traced("queue", &log, false), Egress: traced("egress", &log, false)}
	want := []string{"rate limit", "audit", "queue", "egress", "backend"}

	at := Stack(backend, all)
	opened := Stack(backend, Layers{Egress: all.Egress})
	queued := Stack(opened, Layers{Queue: all.Queue})
	inTurns := Stack(queued, Layers{RateLimit: all.RateLimit, Audit: all.Audit})
	for name, sb := range map[string]Sandbox{"at once": at, "in turns": inTurns} {
		log = nil
		if _, err := sb.Run(context.Background(), Spec{}); err != nil || !slices.Equal(log, want) {
			t.Errorf("%s: %v, passed %q; want %q", name, err, log, want)
		}
	}

	log = nil
	if _, err := Stack(backend, Layers{Audit: all.Audit, Egress: all.Egress}).Run(context.Background(), Spec{}); err != nil ||
		!slices.Equal(log, []string{"audit", "egress", "backend"}) {
		t.Errorf("audit and egress only: %v, passed %q", err, log)
	}

	log = nil
	refused := Stack(queued, Layers{RateLimit: traced("rate limit", &log, true), Audit: all.Audit})
	if _, err := refused.Run(context.Background(), Spec{}); !errors.Is(err, errRefused) || !slices.Equal(log, []string{"rate limit"}) {
		t.Errorf("refused by the rate limit: %v, passed %q; want the rate limit alone", err, log)
	}

	if sb := Stack(backend, Layers{}); sb != Sandbox(backend) {
		t.Errorf("no layers: got %T, want the backend itself", sb)
	}
}
