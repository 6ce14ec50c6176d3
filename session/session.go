// Package session ties the agent to the store, the one way for the CLI,
// the server and MCP: a run takes its session's lease (Start), records its
// attempts and every step in the audit log as it goes (so that a killed
// process loses at most the attempt under way), executes only what was
// recorded first (Audited) under the session's rate limit, and records its
// end (Finish); Summary renders a session's earlier turns for the model.
package session

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/codeagent/codeagent/agent"
	"github.com/codeagent/codeagent/store"
)

// auditOutputBytes is how much of each output stream an audit record keeps;
// the record also has the hash of the whole stream as the program wrote it
// (up to the sandbox's output cap).
const auditOutputBytes = 2048

// Recorder is an agent.Observer that writes attempts to the store and each
// step to the audit log, numbering the run's records from 1. A record that
// cannot be written is logged and remembered (Err): the run's sandbox (see
// Audited) then refuses to execute anything more, so that nothing runs
// unrecorded, and its number stays unused, so that the log shows the gap
// once a later record lands.
type Recorder struct {
	ctx     context.Context
	st      *store.Store
	log     *slog.Logger
	session string // name, in audit records
	turnID  string // "" when the run is not part of a session
	runID   string
	n       int
	cur     store.Attempt
	model   time.Duration
	sandbox time.Duration

	mu        sync.Mutex
	seq       int64 // the run's last record number
	execs     int   // executions started
	err       error // the first record that could not be written
	firstLost int64
}

var _ agent.Observer = (*Recorder)(nil)

// NewRecorder records into st. session may be "" and turnID too (a run
// outside any session is still audited). A nil st records nothing: the
// audit log of a library's server that was given no store.
func NewRecorder(ctx context.Context, st *store.Store, session, turnID, runID string, log *slog.Logger) *Recorder {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// Records of a cancelled run are written all the same.
	return &Recorder{ctx: context.WithoutCancel(ctx), st: st, log: log, session: session, turnID: turnID, runID: runID}
}

// Event implements agent.Observer.
func (r *Recorder) Event(e agent.Event) {
	switch e.Type {
	case agent.EventAttemptStart:
		r.n++
		r.cur = store.Attempt{N: r.n}
	case agent.EventGenerated:
		if e.Phase != agent.PhaseTool { // a tool-mode answer has no code of its own
			r.cur.Code = e.Code
		}
		r.cur.ErrorClass = string(e.ErrorClass)
		r.model += time.Duration(e.DurationMS) * time.Millisecond
		r.audit("generated", map[string]any{"attempt": e.Attempt, "phase": e.Phase, "code": e.Code,
			"code_sha256": codeHash(e.CodeSHA256, e.Code), "error_class": e.ErrorClass, "model_ms": e.DurationMS})
		r.save()
	case agent.EventChecked:
		if f, err := json.Marshal(e.Findings); err == nil && len(e.Findings) > 0 {
			r.cur.Findings = f
		}
		safe := e.Safe != nil && *e.Safe
		if !safe {
			r.cur.ErrorClass = string(e.ErrorClass)
		}
		r.audit("checked", map[string]any{"attempt": e.Attempt, "phase": e.Phase, "safe": safe, "findings": e.Findings})
		r.save()
	case agent.EventExecuted:
		if e.Result != nil {
			res := e.Result
			r.cur.Status, r.cur.ExitCode = res.Status, res.ExitCode
			r.cur.Wall = time.Duration(res.WallMS) * time.Millisecond
			r.cur.CPU = time.Duration(res.CPUMS) * time.Millisecond
			r.cur.PeakMemory = res.PeakMemoryBytes
			rec := map[string]any{"attempt": e.Attempt, "phase": e.Phase,
				"status": res.Status, "exit_code": res.ExitCode, "signal": res.Signal, "message": res.Message,
				"wall_ms": res.WallMS, "cpu_ms": res.CPUMS, "peak_memory_bytes": res.PeakMemoryBytes,
				"stdout_sha256": hash([]byte(res.Stdout)), "stderr_sha256": hash([]byte(res.Stderr)),
				"stdout": head(res.Stdout), "stderr": head(res.Stderr),
				"stdout_truncated": res.StdoutTruncated, "stderr_truncated": res.StderrTruncated,
				"error_class": e.ErrorClass}
			if len(res.WeakIsolation) > 0 {
				rec["weak_isolation"] = res.WeakIsolation
			}
			if len(e.Cut) > 0 {
				rec["cut"] = cutRecords(e.Cut)
			}
			r.audit("executed", rec)
		}
		r.cur.ErrorClass = string(e.ErrorClass)
		r.sandbox += time.Duration(e.DurationMS) * time.Millisecond
		r.save()
	case agent.EventVerified:
		if e.Verdict != nil {
			if v, err := json.Marshal(e.Verdict); err == nil {
				r.cur.Verdict = string(v)
			}
		}
		r.cur.ErrorClass = string(e.ErrorClass)
		r.model += time.Duration(e.DurationMS) * time.Millisecond
		r.audit("verified", map[string]any{"attempt": e.Attempt, "verdict": e.Verdict, "model_ms": e.DurationMS})
		r.save()
	case agent.EventToolCall:
		r.audit("tool_call", map[string]any{"attempt": e.Attempt, "step": e.Step, "tool": e.Tool, "call_id": e.CallID,
			"arguments_sha256": hash(e.Arguments), "arguments": head(string(e.Arguments))})
	case agent.EventToolResult:
		r.audit("tool_result", map[string]any{"attempt": e.Attempt, "step": e.Step, "tool": e.Tool, "call_id": e.CallID,
			"result_sha256": hash([]byte(e.ToolResult)), "result": head(e.ToolResult), "error_class": e.ErrorClass, "duration_ms": e.DurationMS})
	case agent.EventReplayed:
		rec := map[string]any{"attempt": e.Attempt, "code_sha256": codeHash(e.CodeSHA256, e.Code), "difference": e.Message,
			"error_class": e.ErrorClass, "duration_ms": e.DurationMS}
		if res := e.Result; res != nil {
			rec["status"], rec["exit_code"] = res.Status, res.ExitCode
			rec["stdout_sha256"], rec["stdout"], rec["stderr"] = hash([]byte(res.Stdout)), head(res.Stdout), head(res.Stderr)
		}
		r.audit("replayed", rec)
		r.cur.Code, r.cur.ErrorClass = e.Code, string(e.ErrorClass)
		r.sandbox += time.Duration(e.DurationMS) * time.Millisecond
		r.save()
	case agent.EventReviewed:
		if rv := e.Review; rv != nil {
			r.model += time.Duration(e.DurationMS) * time.Millisecond
			r.audit("reviewed", map[string]any{"attempt": e.Attempt, "phase": e.Phase, "step": e.Step, "tool": e.Tool,
				"approve": rv.Approve, "concerns": rv.Concerns, "note": rv.Note, "model_ms": e.DurationMS})
		}
	case agent.EventApprovalRequired:
		if a := e.Approval; a != nil {
			r.audit("approval_required", map[string]any{"attempt": e.Attempt, "phase": e.Phase, "step": e.Step, "tool": e.Tool,
				"approval_id": a.ID, "code_sha256": codeHash(a.CodeSHA256, a.Code), "findings": len(a.Findings),
				"warnings": a.Warnings, "concerns": a.Concerns, "ask_hosts": a.AskHosts, "ask_packages": a.AskPackages})
		}
	case agent.EventApproval:
		if d := e.Decision; d != nil {
			rec := map[string]any{"attempt": e.Attempt, "phase": e.Phase, "step": e.Step, "tool": e.Tool,
				"approval_id": d.ID, "decision": d.Decision, "reason": d.Reason, "by": d.By,
				"code_sha256": d.CodeSHA256, "edited_sha256": d.EditSHA256, "rest": d.Rest,
				"granted_hosts": d.Hosts, "granted_packages": d.Packages}
			if d.Edited != "" {
				rec["edited_code"] = d.Edited
			}
			r.audit("approval", rec)
			if d.Edited != "" && e.Phase != agent.PhaseTool { // the edit is the attempt's program
				r.cur.Code = d.Edited
				r.save()
			}
		}
	case agent.EventDone:
		success := e.Success != nil && *e.Success
		r.audit("done", map[string]any{"success": success, "message": e.Message, "duration_ms": e.DurationMS})
	}
}

// save writes the attempt under way; each step overwrites the row.
func (r *Recorder) save() {
	if r.turnID == "" || r.cur.N == 0 || r.st == nil {
		return
	}
	if err := r.st.AddAttempt(r.ctx, r.turnID, r.cur); err != nil {
		r.log.Warn("record attempt", "err", err)
	}
}

func (r *Recorder) audit(kind string, data map[string]any) { _ = r.Audit(kind, data) }

// Audit writes the run's next record. A failure is remembered (see Err).
func (r *Recorder) Audit(kind string, data map[string]any) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.auditLocked(kind, data)
}

func (r *Recorder) auditLocked(kind string, data map[string]any) error {
	r.seq++
	if r.st == nil {
		return nil
	}
	if _, err := r.st.AuditRun(r.ctx, r.session, r.runID, r.seq, kind, data); err != nil {
		r.log.Warn("audit", "kind", kind, "err", err)
		if r.err == nil {
			r.err, r.firstLost = err, r.seq
		}
		return err
	}
	return nil
}

// Err returns the first record of the run that could not be written.
func (r *Recorder) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// closeFailed writes, once the run is over, the record saying that some
// of its records could not be written, with the reserve of the store if
// the disk is full. It does nothing when every record was written.
func (r *Recorder) closeFailed() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err == nil {
		return nil
	}
	first, cause := r.firstLost, r.err.Error()
	if store.IsDiskFull(r.err) {
		cause = "the disk of the data directory is full"
	}
	r.seq++
	seq := r.seq
	return r.st.WithReserve(func() error {
		_, err := r.st.AuditRun(r.ctx, r.session, r.runID, seq, store.KindAuditFailed,
			map[string]any{"error": cause, "first_lost": first})
		return err
	})
}

// cutRecords are what codeagent cut from an execution's output, as the
// audit log keeps output: the start of each text with the hash of all of
// it.
func cutRecords(cuts []agent.Cut) []map[string]any {
	recs := make([]map[string]any, 0, len(cuts))
	for _, c := range cuts {
		recs = append(recs, map[string]any{"what": c.What, "stream": c.Stream, "text": head(c.Text), "text_sha256": hash([]byte(c.Text))})
	}
	return recs
}

func hash(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// codeHash is the hash an event gives of its code as it ran, else (an
// event of an older agent, or no code) the hash of the code it shows.
func codeHash(sha, code string) string {
	if sha != "" {
		return sha
	}
	return hash([]byte(code))
}

// head keeps the start of an output stream, cut at a character boundary.
func head(s string) string {
	if len(s) <= auditOutputBytes {
		return s
	}
	cut := auditOutputBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// Totals are the time a run spent waiting for the model and in the
// sandbox, summed from its events.
func (r *Recorder) Totals() (model, sandbox time.Duration) { return r.model, r.sandbox }
