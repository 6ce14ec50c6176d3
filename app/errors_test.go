package app

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/codeagent/codeagent/egress"
	"github.com/codeagent/codeagent/kernel"
	"github.com/codeagent/codeagent/llm"
	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/sandbox/ratelimit"
	"github.com/codeagent/codeagent/session"
	"github.com/codeagent/codeagent/store"
)

// TestDescribe: each library error a door may meet gets its class and
// stable code, also wrapped with context, and a public message without the
// host paths of its cause.
func TestDescribe(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("run the program: %w", err) }
	for _, c := range []struct {
		err   error
		class Class
		code  string
		retry time.Duration
	}{
		{invalidf("bad"), Invalid, "bad_request", 0},
		{&QueueFullError{RetryAfter: 3 * time.Second}, Busy, "queue_full", 3 * time.Second},
		{&kernel.BusyError{Max: 2, RetryAfter: time.Second}, Busy, "kernels_busy", time.Second},
		{&ratelimit.LimitError{PerMinute: 1, Wait: 2 * time.Second}, Busy, "rate_limited", 2 * time.Second},
		{&store.LeaseHeldError{Session: "s"}, Busy, "session_busy", 0},
		{kernel.ErrInvalid, Invalid, "bad_request", 0},
		{kernel.ErrWorkspace, Conflict, "conflict", 0},
		{kernel.ErrEnded, Unavailable, "kernel_ended", time.Second},
		{store.ErrNotFound, NotFound, "not_found", 0},
		{store.ErrExists, Conflict, "conflict", 0},
		{&egress.CeilingError{Rule: "example.com"}, Forbidden, "network_not_allowed", 0},
		{&egress.RuleError{Rule: "*"}, Invalid, "bad_request", 0},
		{&sandbox.SetupError{Reason: "no cgroup at /sys/fs/cgroup/x", Err: sandbox.ErrUnsafeWorkspace}, Invalid, "unsafe_workspace", 0},
		{sandbox.ErrInvalidSpec, Invalid, "bad_request", 0},
		{sandbox.ErrSymlinkInPath, Conflict, "symlink_refused", 0},
		{&sandbox.SetupError{Reason: "no cgroup at /sys/fs/cgroup/x"}, Setup, "sandbox_unavailable", 0},
		{&llm.Error{Message: "the key was refused"}, Provider, "provider_error", 0},
		{context.DeadlineExceeded, Timeout, "timeout", 0},
		{context.Canceled, Unavailable, "canceled", 0},
		{&session.AuditError{Err: errors.New("write /var/lib/x: read-only")}, Internal, "audit_failed", 0},
		{syscall.ENOSPC, DiskFull, "disk_full", 0},
		{errors.New("open /etc/secret: permission denied"), Internal, "internal", 0},
	} {
		for _, err := range []error{c.err, wrap(c.err)} {
			d := Describe(err)
			if d.Class != c.class || d.Code != c.code || d.RetryAfter != c.retry {
				t.Errorf("Describe(%v) = %s %s %v, want %s %s %v", err, d.Class, d.Code, d.RetryAfter, c.class, c.code, c.retry)
			}
			if strings.Contains(d.Message, "/sys/") || strings.Contains(d.Message, "/etc/") || strings.Contains(d.Message, "/var/") {
				t.Errorf("Describe(%v).Message = %q shows a host path", err, d.Message)
			}
			if !errors.Is(d, c.err) && d.Err != nil && !errors.Is(d.Err, c.err) {
				t.Errorf("Describe(%v) lost its cause", err)
			}
		}
	}
	if Describe(nil) != nil {
		t.Error("Describe(nil) is not nil")
	}
	if !errors.Is(fmt.Errorf("x: %w", invalidf("bad")), ErrInvalid) || errors.Is(Errorf(Busy, "b"), ErrInvalid) {
		t.Error("errors.Is(_, ErrInvalid) does not follow the class")
	}
}

// Host paths are taken out of public messages; web addresses (an index's,
// a registry's) stay whole.
func TestPublicMessageKeepsWebAddresses(t *testing.T) {
	for in, want := range map[string]string{
		"cannot open /var/lib/codeagent/x": "cannot open [path]",
		"install dependencies: the index https://127.0.0.1:1/simple/ could not be reached: connection refused": "install dependencies: the index https://127.0.0.1:1/simple/ could not be reached: connection refused",
		"fetch http://pypi.test/simple/ into /srv/envs/abc":                                                    "fetch http://pypi.test/simple/ into [path]",
	} {
		if got := PublicMessage(in); got != want {
			t.Errorf("PublicMessage(%q) = %q, want %q", in, got, want)
		}
	}
}
