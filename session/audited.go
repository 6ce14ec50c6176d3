package session

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/codeagent/codeagent/procid"
	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/store"
)

// AuditError says that a record of the audit log could not be written, so
// that what it would have recorded does not run.
type AuditError struct{ Err error }

func (e *AuditError) Error() string {
	cause := e.Err.Error()
	if store.IsDiskFull(e.Err) {
		cause = "the disk of the data directory is full"
	}
	return "the audit log could not be written (" + cause + "): stopped before running anything more"
}

func (e *AuditError) Unwrap() error { return e.Err }

// audited is a sandbox whose executions are recorded before they start and
// after they end.
type audited struct {
	next sandbox.Sandbox
	rec  *Recorder
}

// Audited returns sb under rec: every execution is recorded (exec_start,
// with this process as its owner) before it starts, and refused with an
// *AuditError when that record, or any earlier record of the run, could
// not be written; its end is recorded after (exec_end), and a failure to
// record it is an *AuditError too. Closing it does not close sb.
func Audited(sb sandbox.Sandbox, rec *Recorder) sandbox.Sandbox { return &audited{next: sb, rec: rec} }

func (a *audited) Run(ctx context.Context, spec sandbox.Spec) (sandbox.Result, error) {
	files := make(map[string]string, len(spec.Files))
	for _, f := range spec.Files {
		s := sha256.Sum256(f.Data)
		files[f.Path] = hex.EncodeToString(s[:])
	}
	start := map[string]any{"command": spec.Command, "files_sha256": files, "limits": spec.Limits.WithDefaults()}
	if n := spec.Network; n != nil {
		// The network granted, and any test overrides of DNS, before it runs.
		start["network"] = map[string]any{"allow": n.Allow, "max_bytes": n.MaxBytes, "resolve": n.Resolve}
	}
	return a.rec.Execution(start, func() (sandbox.Result, error) { return a.next.Run(ctx, spec) })
}

// Execution records an execution that run makes, as Audited does for a
// sandbox's: exec_start with start's fields (plus its number and owner)
// before, exec_end with run's verdict after. It is how an execution made
// without a sandbox.Sandbox (a kernel's cell) is audited.
func (r *Recorder) Execution(start map[string]any, run func() (sandbox.Result, error)) (sandbox.Result, error) {
	r.mu.Lock()
	if r.err != nil {
		r.mu.Unlock()
		return sandbox.Result{}, &AuditError{Err: r.err}
	}
	r.execs++
	k := r.execs
	rec := map[string]any{"exec": k, "owner": procid.Self().String()}
	for key, v := range start {
		rec[key] = v
	}
	err := r.auditLocked(store.KindExecStart, rec)
	r.mu.Unlock()
	if err != nil {
		return sandbox.Result{}, &AuditError{Err: err}
	}
	res, runErr := run()
	end := map[string]any{"exec": k, "status": res.Status.String(), "exit_code": res.ExitCode, "signal": res.Signal,
		"wall_ms": res.WallTime.Milliseconds(), "cpu_ms": res.CPUTime.Milliseconds(), "peak_memory_bytes": res.PeakMemory}
	if res.Egress != nil {
		// Every connection attempt, allowed or refused, with its bytes.
		end["egress"] = res.Egress.JSON()
	}
	if len(res.WeakIsolation) > 0 {
		// The caller accepted weaker isolation than required: say what.
		end["weak_isolation"] = res.WeakIsolation
	}
	if runErr != nil {
		end["status"], end["error"] = sandbox.StatusSandboxError.String(), runErr.Error()
	}
	if err := r.Audit(store.KindExecEnd, end); err != nil {
		return res, &AuditError{Err: fmt.Errorf("record the end of execution %d: %w", k, err)}
	}
	return res, runErr
}

func (a *audited) Close() error { return nil }

// Cell records a kernel's cell that run executes (see Execution): its
// code's hash and wall-clock limit. A nil Recorder only runs it.
func (r *Recorder) Cell(code string, timeout time.Duration, run func() (sandbox.Result, error)) (sandbox.Result, error) {
	if r == nil {
		return run()
	}
	return r.Execution(map[string]any{"kernel_cell": true, "code_sha256": hash([]byte(code)), "timeout_ms": timeout.Milliseconds()}, run)
}
