package app

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/codeagent/codeagent/deps"
	"github.com/codeagent/codeagent/egress"
	"github.com/codeagent/codeagent/internal/lazyre"
	"github.com/codeagent/codeagent/kernel"
	"github.com/codeagent/codeagent/llm"
	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/sandbox/ratelimit"
	"github.com/codeagent/codeagent/session"
	"github.com/codeagent/codeagent/store"
)

// Class is what kind of failure an error is. The classes are defined here
// once, and each door maps them once: exit statuses in
// cmd/codeagent/exitcode.go, HTTP statuses in server/errors.go, MCP tool
// errors in mcpserver/errors.go.
type Class string

// The error classes.
const (
	// Internal is a failure nobody outside can fix by asking again
	// differently; its detail goes to the log only.
	Internal Class = "internal"
	// Invalid is a request, flag or file that is the caller's to fix.
	Invalid Class = "invalid"
	// NotFound is a session, run, file or turn that does not exist (for
	// this caller).
	NotFound Class = "not_found"
	// Conflict is a request at odds with the state: the name exists, a
	// kernel has another workspace, a link is in the way.
	Conflict Class = "conflict"
	// Busy is a request refused for now: load (queue, rate limit,
	// kernels, runs) or a session another process holds; RetryAfter, when
	// known, says when to ask again.
	Busy Class = "busy"
	// Unavailable is a service that cannot do the work now (shutting
	// down, a kernel ended, canceled).
	Unavailable Class = "unavailable"
	// DiskFull is any failure caused by a full disk; nothing was stored.
	DiskFull Class = "disk_full"
	// Forbidden is a request beyond what this caller or server allows
	// (a network outside the ceiling).
	Forbidden Class = "forbidden"
	// Setup is a sandbox that could not be set up or refused to run the
	// program (isolation missing, a backend down).
	Setup Class = "sandbox_setup"
	// Provider is the model provider failing after its retries.
	Provider Class = "provider"
	// Timeout is a request that took longer than its deadline.
	Timeout Class = "timeout"
)

// Classes are every class, for the doors' tests of their mappings.
var Classes = []Class{Internal, Invalid, NotFound, Conflict, Busy, Unavailable, DiskFull, Forbidden, Setup, Provider, Timeout}

// Error is an error with its class, a stable code for clients (the HTTP
// API's error.code) and a message safe to show anyone who may call the
// door: no host paths, no causes from the host's configuration.
type Error struct {
	Class      Class
	Code       string
	Message    string
	RetryAfter time.Duration // Busy and Unavailable: when to ask again
	Err        error         // the cause, for the log
}

func (e *Error) Error() string { return e.Message }
func (e *Error) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrInvalid) true of an Error of class Invalid.
func (e *Error) Is(target error) bool { return target == ErrInvalid && e.Class == Invalid }

// ErrInvalid matches (errors.Is) every error of class Invalid that app
// made; Describe classifies the rest.
var ErrInvalid = errors.New("invalid request")

// Errorf returns an Error of class c whose message is the formatted
// text; its code is the class's name ("bad_request" for Invalid, as the
// HTTP API has always said).
func Errorf(c Class, format string, a ...any) error {
	code := string(c)
	if c == Invalid {
		code = "bad_request"
	}
	return &Error{Class: c, Code: code, Message: fmt.Sprintf(format, a...)}
}

// invalidf returns an error of class Invalid.
func invalidf(format string, a ...any) error { return Errorf(Invalid, format, a...) }

// hostPath matches what looks like an absolute host path in a message.
var hostPath = lazyre.New(`(^|[\s"'(=:])/[^\s"')]*`)

// PublicMessage is msg without host paths: answers to clients never show
// where a server keeps its files (its log has them).
// Web addresses (an index's, a registry's) are not paths and stay.
func PublicMessage(msg string) string {
	var b strings.Builder
	for {
		loc := webURL.FindStringIndex(msg)
		if loc == nil {
			b.WriteString(hostPath.ReplaceAllString(msg, "$1[path]"))
			return b.String()
		}
		b.WriteString(hostPath.ReplaceAllString(msg[:loc[0]], "$1[path]"))
		b.WriteString(msg[loc[0]:loc[1]])
		msg = msg[loc[1]:]
	}
}

// webURL matches an http or https address in a message.
var webURL = lazyre.New(`https?://[^\s"')]+`)

// Describe is the one place where the libraries' errors get their class,
// code and public message. An error that is already an *Error is returned
// as it is; nil gives nil; anything unknown is Internal, "internal error".
func Describe(err error) *Error {
	if err == nil {
		return nil
	}
	var (
		ae    *Error
		qf    *QueueFullError
		le    *ratelimit.LimitError
		se    *sandbox.SetupError
		kb    *kernel.BusyError
		ce    *egress.CeilingError
		re    *egress.RuleError
		held  *store.LeaseHeldError
		audit *session.AuditError
		pe    *llm.Error
		ie    *deps.InstallError
	)
	d := func(c Class, code, msg string) *Error {
		return &Error{Class: c, Code: code, Message: PublicMessage(msg), Err: err}
	}
	switch {
	case errors.As(err, &ae):
		if error(ae) == err {
			return ae
		}
		c := *ae // with the context wrapped around it
		c.Message, c.Err = PublicMessage(err.Error()), err
		return &c
	case store.IsDiskFull(err):
		return d(DiskFull, "disk_full", "the disk is full: nothing was stored; try again when an operator has made room")
	case errors.As(err, &held):
		// Busy, not Conflict: the session is free again when the other
		// process's run ends.
		return d(Busy, "session_busy",
			fmt.Sprintf("the session is in use by another codeagent process (%s)", held.Holder.Owner.Describe()))
	case errors.As(err, &audit):
		return d(Internal, "audit_failed", audit.Error())
	case errors.As(err, &qf):
		e := d(Busy, "queue_full", err.Error())
		e.RetryAfter = qf.RetryAfter
		return e
	case errors.As(err, &kb):
		e := d(Busy, "kernels_busy", err.Error())
		e.RetryAfter = kb.RetryAfter
		return e
	case errors.As(err, &le):
		e := d(Busy, "rate_limited", err.Error())
		e.RetryAfter = le.Wait
		return e
	case errors.Is(err, kernel.ErrInvalid):
		return d(Invalid, "bad_request", err.Error())
	case errors.Is(err, kernel.ErrWorkspace):
		return d(Conflict, "conflict", err.Error())
	case errors.Is(err, kernel.ErrEnded):
		e := d(Unavailable, "kernel_ended", "the kernel ended before the cell ran: try again")
		e.RetryAfter = time.Second
		return e
	case errors.As(err, &ie) && ie.Unreachable:
		return d(Invalid, "index_unreachable", err.Error())
	case errors.As(err, &ie):
		// pip's own words: the package not found, no wheel, a conflict.
		return d(Invalid, "dependencies_failed", err.Error())
	case errors.Is(err, deps.ErrInvalid):
		return d(Invalid, "bad_request", err.Error())
	case errors.Is(err, deps.ErrInUse):
		return d(Conflict, "env_in_use", err.Error()+": an execution is using it")
	case errors.Is(err, store.ErrNotFound):
		return d(NotFound, "not_found", "not found")
	case errors.Is(err, store.ErrExists):
		return d(Conflict, "conflict", err.Error())
	case errors.As(err, &ce):
		return d(Forbidden, "network_not_allowed", err.Error())
	case errors.As(err, &re):
		return d(Invalid, "bad_request", "network.allow: "+err.Error())
	case errors.Is(err, sandbox.ErrUnsafeWorkspace):
		// Checked before SetupError, which may wrap it: the directory is
		// the caller's (a CLI user's folder) or the operator's (a server's
		// data directory) to change, never a broken sandbox.
		return d(Invalid, "unsafe_workspace", err.Error())
	case errors.Is(err, sandbox.ErrInvalidSpec):
		return d(Invalid, "bad_request", err.Error())
	case errors.Is(err, sandbox.ErrSymlinkInPath):
		return d(Conflict, "symlink_refused",
			"a directory on the way to the workspace is a symbolic link that codeagent did not make, and it does not follow it")
	case errors.As(err, &se):
		// The reason only: the cause names cgroups, mounts and
		// directories of the host.
		return d(Setup, "sandbox_unavailable", "the sandbox could not run the program: "+se.Reason)
	case errors.As(err, &pe) && !errors.Is(err, context.Canceled):
		// An interrupt is not the provider's failure.
		return d(Provider, "provider_error", pe.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return d(Timeout, "timeout", "the request took too long")
	case errors.Is(err, context.Canceled):
		return d(Unavailable, "canceled", "the request was canceled")
	}
	return d(Internal, "internal", "internal error")
}
