package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Turn statuses.
const (
	TurnRunning     = "running"
	TurnSucceeded   = "succeeded"
	TurnFailed      = "failed"
	TurnCanceled    = "canceled"    // stopped before its end (an interrupt, a shutdown, a client)
	TurnInterrupted = "interrupted" // left running by a process that died
)

// Turn is one task given to the agent in a session.
type Turn struct {
	ID           string        `json:"id"`
	SessionID    string        `json:"session_id"`
	Seq          int           `json:"seq"`
	Task         string        `json:"task"`
	Status       string        `json:"status"`
	Code         string        `json:"code"`
	Output       string        `json:"output"`
	Attempts     int           `json:"attempts"`
	InputTokens  int64         `json:"input_tokens"`
	OutputTokens int64         `json:"output_tokens"`
	ModelTime    time.Duration `json:"model_ns"`
	SandboxTime  time.Duration `json:"sandbox_ns"`
	StartedAt    time.Time     `json:"started_at"`
	FinishedAt   time.Time     `json:"finished_at"`       // zero while running
	Message      string        `json:"message,omitempty"` // why it ended so: an error, a cancellation's cause
	Artifacts    []Artifact    `json:"artifacts"`
	// Result is the agent's result as JSON, and Events the events of the
	// run, for the server to show a finished run after a restart; FinishTurn
	// stores them when set, TurnByID and RunEvents read them.
	Result json.RawMessage   `json:"-"`
	Events []json.RawMessage `json:"-"`
}

// Attempt is one program of a turn and what became of it.
type Attempt struct {
	N          int             `json:"n"`
	Code       string          `json:"code"`
	Findings   json.RawMessage `json:"findings"` // the checker's findings, as JSON
	Status     string          `json:"status"`   // sandbox status; "" when the program did not run
	ExitCode   int             `json:"exit_code"`
	Wall       time.Duration   `json:"wall_ns"`
	CPU        time.Duration   `json:"cpu_ns"`
	PeakMemory int64           `json:"peak_memory_bytes"`
	ErrorClass string          `json:"error_class"`
	Verdict    string          `json:"verdict"`
	CreatedAt  time.Time       `json:"created_at"`
}

// Artifact is a file a turn created or changed in the workspace.
type Artifact struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// BeginTurn records a running turn at the end of a session.
func (s *Store) BeginTurn(ctx context.Context, sessionID, task string) (Turn, error) {
	return s.BeginTurnAs(ctx, newID(), sessionID, task)
}

// BeginTurnAs is BeginTurn with the turn's ID chosen by the caller.
func (s *Store) BeginTurnAs(ctx context.Context, id, sessionID, task string) (Turn, error) {
	t := Turn{ID: id, SessionID: sessionID, Task: task, Status: TurnRunning, StartedAt: time.Now()}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return Turn{}, fmt.Errorf("begin turn: %w", err)
	}
	defer tx.Rollback()
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(seq), 0) + 1 FROM turns WHERE session_id = ?`, sessionID).Scan(&t.Seq); err != nil {
		return Turn{}, fmt.Errorf("begin turn: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO turns (id, session_id, seq, task, status, started_at) VALUES (?, ?, ?, ?, ?, ?)`,
		t.ID, sessionID, t.Seq, task, TurnRunning, t.StartedAt.UnixMilli()); err != nil {
		return Turn{}, fmt.Errorf("begin turn: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE sessions SET updated_at = ? WHERE id = ?`, now(), sessionID); err != nil {
		return Turn{}, fmt.Errorf("begin turn: %w", err)
	}
	return t, tx.Commit()
}

// AddAttempt records one attempt of a running turn.
func (s *Store) AddAttempt(ctx context.Context, turnID string, a Attempt) error {
	findings := a.Findings
	if len(findings) == 0 {
		findings = json.RawMessage("[]")
	}
	_, err := s.db.ExecContext(ctx, `INSERT OR REPLACE INTO attempts
		(turn_id, n, code, findings, status, exit_code, wall_ms, cpu_ms, peak_memory, error_class, verdict, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		turnID, a.N, a.Code, string(findings), a.Status, a.ExitCode, a.Wall.Milliseconds(), a.CPU.Milliseconds(),
		a.PeakMemory, a.ErrorClass, a.Verdict, now())
	if err != nil {
		return fmt.Errorf("record attempt %d: %w", a.N, err)
	}
	return nil
}

// FinishTurn records the end of a turn with its artifacts, in one transaction.
func (s *Store) FinishTurn(ctx context.Context, t Turn) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("finish turn: %w", err)
	}
	defer tx.Rollback()
	_, err = tx.ExecContext(ctx, `UPDATE turns SET status = ?, code = ?, output = ?, attempts = ?,
		input_tokens = ?, output_tokens = ?, model_ms = ?, sandbox_ms = ?, finished_at = ?, message = ?, result = ? WHERE id = ?`,
		t.Status, t.Code, t.Output, t.Attempts, t.InputTokens, t.OutputTokens,
		t.ModelTime.Milliseconds(), t.SandboxTime.Milliseconds(), now(), t.Message, string(t.Result), t.ID)
	if err != nil {
		return fmt.Errorf("finish turn: %w", err)
	}
	for i, e := range t.Events {
		if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO run_events (turn_id, n, data) VALUES (?, ?, ?)`, t.ID, i+1, string(e)); err != nil {
			return fmt.Errorf("finish turn: %w", err)
		}
	}
	for _, a := range t.Artifacts {
		if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO artifacts (turn_id, path, size, sha256) VALUES (?, ?, ?, ?)`,
			t.ID, a.Path, a.Size, a.SHA256); err != nil {
			return fmt.Errorf("finish turn: %w", err)
		}
	}
	return tx.Commit()
}

// Turns lists a session's turns in order, with their artifacts.
func (s *Store) Turns(ctx context.Context, sessionID string) ([]Turn, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+turnCols+` FROM turns WHERE session_id = ? ORDER BY seq`, sessionID)
	if err != nil {
		return nil, fmt.Errorf("list turns: %w", err)
	}
	defer rows.Close()
	var out []Turn
	for rows.Next() {
		t, err := scanTurn(rows, false)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for i := range out {
		if out[i].Artifacts, err = s.artifacts(ctx, out[i].ID); err != nil {
			return nil, err
		}
	}
	return out, nil
}

const turnCols = `id, session_id, seq, task, status, code, output, attempts,
	input_tokens, output_tokens, model_ms, sandbox_ms, started_at, COALESCE(finished_at, 0), message, result`

func scanTurn(sc interface{ Scan(...any) error }, withResult bool) (Turn, error) {
	var t Turn
	var modelMS, sandboxMS, started, finished int64
	var result string
	if err := sc.Scan(&t.ID, &t.SessionID, &t.Seq, &t.Task, &t.Status, &t.Code, &t.Output, &t.Attempts,
		&t.InputTokens, &t.OutputTokens, &modelMS, &sandboxMS, &started, &finished, &t.Message, &result); err != nil {
		return Turn{}, err
	}
	t.ModelTime, t.SandboxTime = time.Duration(modelMS)*time.Millisecond, time.Duration(sandboxMS)*time.Millisecond
	t.StartedAt = fromMillis(started)
	if finished > 0 {
		t.FinishedAt = fromMillis(finished)
	}
	if withResult && result != "" {
		t.Result = json.RawMessage(result)
	}
	return t, nil
}

// TurnByID returns a turn with its artifacts and result.
func (s *Store) TurnByID(ctx context.Context, id string) (Turn, error) {
	t, err := scanTurn(s.db.QueryRowContext(ctx, `SELECT `+turnCols+` FROM turns WHERE id = ?`, id), true)
	if errors.Is(err, sql.ErrNoRows) {
		return Turn{}, fmt.Errorf("turn %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return Turn{}, fmt.Errorf("turn %q: %w", id, err)
	}
	if t.Artifacts, err = s.artifacts(ctx, id); err != nil {
		return Turn{}, err
	}
	return t, nil
}

// RunEvents returns the events stored with a finished turn.
func (s *Store) RunEvents(ctx context.Context, turnID string) ([]json.RawMessage, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT data FROM run_events WHERE turn_id = ? ORDER BY n`, turnID)
	if err != nil {
		return nil, fmt.Errorf("run events: %w", err)
	}
	defer rows.Close()
	var out []json.RawMessage
	for rows.Next() {
		var d string
		if err := rows.Scan(&d); err != nil {
			return nil, err
		}
		out = append(out, json.RawMessage(d))
	}
	return out, rows.Err()
}

func (s *Store) artifacts(ctx context.Context, turnID string) ([]Artifact, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT path, size, sha256 FROM artifacts WHERE turn_id = ? ORDER BY path`, turnID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Artifact
	for rows.Next() {
		var a Artifact
		if err := rows.Scan(&a.Path, &a.Size, &a.SHA256); err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

// Attempts lists the attempts of a turn in order.
func (s *Store) Attempts(ctx context.Context, turnID string) ([]Attempt, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT n, code, findings, status, exit_code, wall_ms, cpu_ms, peak_memory,
		error_class, verdict, created_at FROM attempts WHERE turn_id = ? ORDER BY n`, turnID)
	if err != nil {
		return nil, fmt.Errorf("list attempts: %w", err)
	}
	defer rows.Close()
	var out []Attempt
	for rows.Next() {
		var a Attempt
		var findings string
		var wall, cpu, created int64
		if err := rows.Scan(&a.N, &a.Code, &findings, &a.Status, &a.ExitCode, &wall, &cpu, &a.PeakMemory,
			&a.ErrorClass, &a.Verdict, &created); err != nil {
			return nil, err
		}
		a.Findings = json.RawMessage(findings)
		a.Wall, a.CPU = time.Duration(wall)*time.Millisecond, time.Duration(cpu)*time.Millisecond
		a.CreatedAt = fromMillis(created)
		out = append(out, a)
	}
	return out, rows.Err()
}

// MarkInterrupted turns every turn still marked running into interrupted,
// whoever runs it: only for tests and tools that know no process runs the
// session. Runs use InterruptRunning under the session's lease.
func (s *Store) MarkInterrupted(ctx context.Context, sessionID string) error {
	_, err := s.db.ExecContext(ctx, `UPDATE turns SET status = ?, finished_at = ? WHERE session_id = ? AND status = ?`,
		TurnInterrupted, now(), sessionID, TurnRunning)
	return err
}

// PruneSessions deletes the sessions not used since before, except those a
// live process holds (their lease's holders are returned in skipped). For
// each it takes the session's lease, calls remove (the caller's cleanup of
// the workspace; nil for none) and then deletes the records, so that no run
// can start in a session half removed. It returns the names it deleted.
func (s *Store) PruneSessions(ctx context.Context, before time.Time, remove func(Session) error) (names []string, skipped []*LeaseHeldError, err error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+sessionCols+` FROM sessions s WHERE s.updated_at < ?`, before.UnixMilli())
	if err != nil {
		return nil, nil, fmt.Errorf("prune sessions: %w", err)
	}
	var old []Session
	for rows.Next() {
		sess, err := scanSession(rows)
		if err != nil {
			rows.Close()
			return nil, nil, err
		}
		old = append(old, sess)
	}
	rows.Close()
	for _, sess := range old {
		err := s.RemoveSession(ctx, sess, remove)
		var held *LeaseHeldError
		switch {
		case errors.As(err, &held):
			skipped = append(skipped, held)
		case err != nil:
			return names, skipped, err
		default:
			names = append(names, sess.Name)
		}
	}
	return names, skipped, nil
}

// RemoveSession takes sess's lease (a *LeaseHeldError when a live process
// holds it), calls remove, and deletes the session's records (not its
// audit records).
func (s *Store) RemoveSession(ctx context.Context, sess Session, remove func(Session) error) error {
	l, err := s.AcquireLease(ctx, sess, "codeagent sessions rm", time.Minute)
	if err != nil {
		return err
	}
	if remove != nil {
		if err := remove(sess); err != nil {
			_ = s.ReleaseLease(context.WithoutCancel(ctx), l)
			return fmt.Errorf("remove session %q: %w", sess.Name, err)
		}
	}
	return s.DeleteSession(ctx, sess.Name) // the lease goes with it
}
