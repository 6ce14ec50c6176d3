package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
)

// ErrExists is returned when an owner already has a session with a label.
var ErrExists = errors.New("already exists")

// OwnedSession is a session that belongs to an API key (its owner), known
// to it by Label.
type OwnedSession struct {
	Session
	Owner string `json:"-"`
	Label string `json:"label"`
}

// OwnedName is the store name of an owner's session: it starts with "@",
// which CLI session names cannot, so the two never collide.
func OwnedName(owner, label string) string { return "@" + owner + "/" + label }

// CreateOwnedSession records a new session of owner under label, with the
// workspace directory that workspace returns for the new session's ID.
func (s *Store) CreateOwnedSession(ctx context.Context, owner, label string, workspace func(id string) string) (OwnedSession, error) {
	t := now()
	sess := Session{ID: newID(), Name: OwnedName(owner, label), CreatedAt: fromMillis(t), UpdatedAt: fromMillis(t)}
	sess.Workspace = workspace(sess.ID)
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return OwnedSession{}, fmt.Errorf("create session: %w", err)
	}
	defer tx.Rollback()
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM session_owners WHERE owner = ? AND label = ?`, owner, label).Scan(&n); err != nil {
		return OwnedSession{}, fmt.Errorf("create session: %w", err)
	}
	if n > 0 {
		return OwnedSession{}, fmt.Errorf("session %q: %w", label, ErrExists)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO sessions (id, name, workspace, created_at, updated_at) VALUES (?, ?, ?, ?, ?)`,
		sess.ID, sess.Name, sess.Workspace, t, t); err != nil {
		if strings.Contains(err.Error(), "UNIQUE") {
			return OwnedSession{}, fmt.Errorf("session %q: %w", label, ErrExists)
		}
		return OwnedSession{}, fmt.Errorf("create session: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO session_owners (session_id, owner, label) VALUES (?, ?, ?)`, sess.ID, owner, label); err != nil {
		return OwnedSession{}, fmt.Errorf("create session: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return OwnedSession{}, fmt.Errorf("create session: %w", err)
	}
	return OwnedSession{Session: sess, Owner: owner, Label: label}, nil
}

const ownedCols = sessionCols + `, o.owner, o.label`

func scanOwned(sc interface{ Scan(...any) error }) (OwnedSession, error) {
	var o OwnedSession
	var c, u int64
	if err := sc.Scan(&o.ID, &o.Name, &o.Workspace, &c, &u, &o.Turns, &o.Owner, &o.Label); err != nil {
		return OwnedSession{}, err
	}
	o.CreatedAt, o.UpdatedAt = fromMillis(c), fromMillis(u)
	return o, nil
}

// OwnedSession returns owner's session id; another owner's session is
// ErrNotFound, exactly like a missing one.
func (s *Store) OwnedSession(ctx context.Context, owner, id string) (OwnedSession, error) {
	o, err := scanOwned(s.db.QueryRowContext(ctx, `SELECT `+ownedCols+`
		FROM sessions s JOIN session_owners o ON o.session_id = s.id WHERE s.id = ? AND o.owner = ?`, id, owner))
	if errors.Is(err, sql.ErrNoRows) {
		return OwnedSession{}, fmt.Errorf("session %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return OwnedSession{}, fmt.Errorf("session %q: %w", id, err)
	}
	return o, nil
}

// OwnedSessions lists owner's sessions, most recently used first.
func (s *Store) OwnedSessions(ctx context.Context, owner string) ([]OwnedSession, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+ownedCols+`
		FROM sessions s JOIN session_owners o ON o.session_id = s.id WHERE o.owner = ?
		ORDER BY s.updated_at DESC, o.label`, owner)
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	defer rows.Close()
	out := []OwnedSession{}
	for rows.Next() {
		o, err := scanOwned(rows)
		if err != nil {
			return nil, fmt.Errorf("list sessions: %w", err)
		}
		out = append(out, o)
	}
	return out, rows.Err()
}

// DeleteOwnedSession removes owner's session id and its turns (not its
// audit records), unless another live process holds its lease.
func (s *Store) DeleteOwnedSession(ctx context.Context, owner, id string) error {
	return s.deleteWhere(ctx, id, `SELECT `+sessionCols+` FROM sessions s JOIN session_owners o ON o.session_id = s.id
		WHERE s.id = ? AND o.owner = ?`, id, owner)
}
