package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/codeagent/codeagent/procid"
)

// Session is a named workspace that turns build on.
type Session struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Workspace string    `json:"workspace"` // host directory
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	Turns     int       `json:"turns"`
}

func newID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// CreateSession records a new session; the name must be unused.
func (s *Store) CreateSession(ctx context.Context, name, workspace string) (Session, error) {
	t := now()
	sess := Session{ID: newID(), Name: name, Workspace: workspace, CreatedAt: fromMillis(t), UpdatedAt: fromMillis(t)}
	_, err := s.db.ExecContext(ctx,
		`INSERT INTO sessions (id, name, workspace, created_at, updated_at) VALUES (?, ?, ?, ?, ?)`,
		sess.ID, name, workspace, t, t)
	if err != nil {
		return Session{}, fmt.Errorf("create session %q: %w", name, err)
	}
	return sess, nil
}

const sessionCols = `s.id, s.name, s.workspace, s.created_at, s.updated_at,
	(SELECT COUNT(*) FROM turns t WHERE t.session_id = s.id)`

func scanSession(sc interface{ Scan(...any) error }) (Session, error) {
	var sess Session
	var c, u int64
	if err := sc.Scan(&sess.ID, &sess.Name, &sess.Workspace, &c, &u, &sess.Turns); err != nil {
		return Session{}, err
	}
	sess.CreatedAt, sess.UpdatedAt = fromMillis(c), fromMillis(u)
	return sess, nil
}

// SessionByName returns the session called name, or ErrNotFound.
func (s *Store) SessionByName(ctx context.Context, name string) (Session, error) {
	sess, err := scanSession(s.db.QueryRowContext(ctx, `SELECT `+sessionCols+` FROM sessions s WHERE s.name = ?`, name))
	if errors.Is(err, sql.ErrNoRows) {
		return Session{}, fmt.Errorf("session %q: %w", name, ErrNotFound)
	}
	return sess, err
}

// Sessions lists every session, most recently used first.
func (s *Store) Sessions(ctx context.Context) ([]Session, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+sessionCols+` FROM sessions s ORDER BY s.updated_at DESC, s.name`)
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	defer rows.Close()
	var out []Session
	for rows.Next() {
		sess, err := scanSession(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, sess)
	}
	return out, rows.Err()
}

// DeleteSession removes a session, its turns and its cells (not its audit
// records). A session another live process holds a lease on is refused with a
// *LeaseHeldError: its run would lose its turn and its workspace.
func (s *Store) DeleteSession(ctx context.Context, name string) error {
	return s.deleteWhere(ctx, name, `SELECT `+sessionCols+` FROM sessions s WHERE s.name = ?`, name)
}

func (s *Store) deleteWhere(ctx context.Context, label, query string, args ...any) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("delete session %q: %w", label, err)
	}
	defer tx.Rollback()
	sess, err := scanSession(tx.QueryRowContext(ctx, query, args...))
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("session %q: %w", label, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("delete session %q: %w", label, err)
	}
	held, live, err := liveLease(ctx, tx, sess.ID)
	if err != nil {
		return fmt.Errorf("delete session %q: %w", label, err)
	}
	if live && held.Owner != procid.Self() {
		return &LeaseHeldError{Session: sess.Name, Holder: held}
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM sessions WHERE id = ?`, sess.ID); err != nil {
		return fmt.Errorf("delete session %q: %w", label, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("delete session %q: %w", label, err)
	}
	return nil
}

// TouchSession marks a session as used now.
func (s *Store) TouchSession(ctx context.Context, id string) error {
	_, err := s.db.ExecContext(ctx, `UPDATE sessions SET updated_at = ? WHERE id = ?`, now(), id)
	return err
}
