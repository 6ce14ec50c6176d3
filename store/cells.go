package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Bounds of the cells kept: each session keeps its newest KeepCells
// cells, and each text of a cell (its code, stdout, stderr, and the
// displays' texts together) is cut to MaxCellText bytes with a note.
const (
	KeepCells   = 500
	MaxCellText = 64 << 10
)

// Cell is a cell run in a session's kernel, as kept for its history. Its
// JSON is the kernel's result's (execution_count, stdout, display, ...)
// plus its number, start and code, for the page to draw it as it did live.
type Cell struct {
	SessionID       string          `json:"-"`
	N               int64           `json:"n"` // 1, 2, ... in the session, never reused
	ExecutionCount  int             `json:"execution_count"`
	StartedAt       time.Time       `json:"started_at"`
	Wall            time.Duration   `json:"-"`
	Code            string          `json:"code"`
	Stdout          string          `json:"stdout"`
	Stderr          string          `json:"stderr"`
	Display         json.RawMessage `json:"display"` // JSON array of MIME bundles, without image bytes
	Images          []string        `json:"images"`  // figures saved in the workspace
	Status          string          `json:"status"`
	ExitCode        int             `json:"exit_code"`
	Message         string          `json:"message,omitempty"`
	ErrorName       string          `json:"error_name,omitempty"`
	ErrorValue      string          `json:"error_value,omitempty"`
	KernelDied      bool            `json:"kernel_died"`
	KernelRestarted bool            `json:"kernel_restarted"`
	RestartReason   string          `json:"restart_reason,omitempty"`
}

// CutText returns s (made valid UTF-8) cut to at most max bytes at a
// character's boundary, with a note of what was left out.
func CutText(s string, max int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= max {
		return s
	}
	i := max
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + fmt.Sprintf("\n[cut: %d more bytes not kept]", len(s)-i)
}

// AddCell records c, a cell of the session c.SessionID, with its texts
// cut to MaxCellText, as the session's next cell, forgets the session's
// cells beyond its newest KeepCells, and marks the session used. It
// returns c as recorded (with its number).
func (s *Store) AddCell(ctx context.Context, c Cell) (Cell, error) {
	c.Code = CutText(c.Code, MaxCellText)
	c.Stdout = CutText(c.Stdout, MaxCellText)
	c.Stderr = CutText(c.Stderr, MaxCellText)
	c.Message = CutText(c.Message, 4<<10)
	c.ErrorName = CutText(c.ErrorName, 1<<10)
	c.ErrorValue = CutText(c.ErrorValue, 4<<10)
	c.RestartReason = CutText(c.RestartReason, 1<<10)
	if len(c.Display) == 0 || !json.Valid(c.Display) {
		c.Display = json.RawMessage("[]")
	}
	if c.Images == nil {
		c.Images = []string{}
	}
	images, err := json.Marshal(c.Images)
	if err != nil {
		return Cell{}, fmt.Errorf("record cell: %w", err)
	}
	if c.StartedAt.IsZero() {
		c.StartedAt = time.Now()
	}
	keep := s.keepCells
	if keep <= 0 {
		keep = KeepCells
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return Cell{}, fmt.Errorf("record cell: %w", err)
	}
	defer tx.Rollback()
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(n), 0) + 1 FROM cells WHERE session_id = ?`, c.SessionID).Scan(&c.N); err != nil {
		return Cell{}, fmt.Errorf("record cell: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO cells (session_id, n, execution_count, started_at, wall_ms, code, stdout, stderr,
		display, images, status, exit_code, message, error_name, error_value, kernel_died, kernel_restarted, restart_reason)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		c.SessionID, c.N, c.ExecutionCount, c.StartedAt.UnixMilli(), c.Wall.Milliseconds(), c.Code, c.Stdout, c.Stderr,
		string(c.Display), string(images), c.Status, c.ExitCode, c.Message, c.ErrorName, c.ErrorValue,
		c.KernelDied, c.KernelRestarted, c.RestartReason); err != nil {
		return Cell{}, fmt.Errorf("record cell: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM cells WHERE session_id = ? AND n <= ?`, c.SessionID, c.N-int64(keep)); err != nil {
		return Cell{}, fmt.Errorf("record cell: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE sessions SET updated_at = ? WHERE id = ?`, now(), c.SessionID); err != nil {
		return Cell{}, fmt.Errorf("record cell: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return Cell{}, fmt.Errorf("record cell: %w", err)
	}
	return c, nil
}

// Cells returns the newest limit (at least 1) cells of the session
// numbered above after and below before (0: no bound), oldest first;
// more says older cells within those bounds were left out (ask again
// with before set to the first one's number).
func (s *Store) Cells(ctx context.Context, sessionID string, after, before int64, limit int) (cells []Cell, more bool, err error) {
	limit = max(limit, 1)
	if before <= 0 {
		before = 1<<63 - 1
	}
	rows, err := s.db.QueryContext(ctx, `SELECT n, execution_count, started_at, wall_ms, code, stdout, stderr, display, images,
		status, exit_code, message, error_name, error_value, kernel_died, kernel_restarted, restart_reason
		FROM cells WHERE session_id = ? AND n > ? AND n < ? ORDER BY n DESC LIMIT ?`, sessionID, after, before, limit+1)
	if err != nil {
		return nil, false, fmt.Errorf("list cells: %w", err)
	}
	defer rows.Close()
	cells = []Cell{}
	for rows.Next() {
		c := Cell{SessionID: sessionID}
		var started, wall int64
		var display, images string
		if err := rows.Scan(&c.N, &c.ExecutionCount, &started, &wall, &c.Code, &c.Stdout, &c.Stderr, &display, &images,
			&c.Status, &c.ExitCode, &c.Message, &c.ErrorName, &c.ErrorValue, &c.KernelDied, &c.KernelRestarted, &c.RestartReason); err != nil {
			return nil, false, fmt.Errorf("list cells: %w", err)
		}
		c.StartedAt, c.Wall, c.Display = fromMillis(started), time.Duration(wall)*time.Millisecond, json.RawMessage(display)
		if json.Unmarshal([]byte(images), &c.Images) != nil || c.Images == nil {
			c.Images = []string{}
		}
		cells = append(cells, c)
	}
	if err := rows.Err(); err != nil {
		return nil, false, fmt.Errorf("list cells: %w", err)
	}
	if len(cells) > limit {
		cells, more = cells[:limit], true
	}
	for i, j := 0, len(cells)-1; i < j; i, j = i+1, j-1 {
		cells[i], cells[j] = cells[j], cells[i]
	}
	return cells, more, nil
}
