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

// Lease is a process's hold on a session: while it lasts, no other process
// runs a turn in the session, removes it or marks its turns interrupted.
// The holder renews it before it expires; a lease whose owner is dead (on
// this host: its pid no longer runs with the same start time) or that
// expired may be taken over.
type Lease struct {
	SessionID string       `json:"session_id"`
	Owner     procid.Owner `json:"owner"`
	Token     string       `json:"-"`
	Purpose   string       `json:"purpose"`
	Acquired  time.Time    `json:"acquired_at"`
	Expires   time.Time    `json:"expires_at"`
}

// live reports whether the lease still holds at now. An owner on this host
// holds it for as long as it runs, whatever the expiry (it may be stalled,
// but it may also still write the workspace); one elsewhere until expiry.
func (l Lease) live(now time.Time) bool {
	if l.Owner.Local() {
		return l.Owner.Alive()
	}
	return now.Before(l.Expires)
}

// LeaseHeldError says who holds a session's lease.
type LeaseHeldError struct {
	Session string
	Holder  Lease
}

func (e *LeaseHeldError) Error() string {
	what := "codeagent"
	if e.Holder.Purpose != "" {
		what = e.Holder.Purpose
	}
	return fmt.Sprintf("session %q is in use by %s (%s, since %s)", e.Session, what, e.Holder.Owner.Describe(),
		e.Holder.Acquired.Format(time.DateTime))
}

// ErrLeaseLost is returned when renewing a lease another process took.
var ErrLeaseLost = errors.New("the session's lease was taken over by another process")

func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func scanLease(sc interface{ Scan(...any) error }) (Lease, error) {
	var l Lease
	var owner string
	var acq, exp int64
	if err := sc.Scan(&l.SessionID, &owner, &l.Token, &l.Purpose, &acq, &exp); err != nil {
		return Lease{}, err
	}
	o, err := procid.Parse(owner)
	if err != nil {
		return Lease{}, err
	}
	l.Owner, l.Acquired, l.Expires = o, fromMillis(acq), fromMillis(exp)
	return l, nil
}

const leaseCols = `session_id, owner, token, purpose, acquired_at, expires_at`

// liveLease returns the live lease of a session in tx, if any; a dead one
// is removed.
func liveLease(ctx context.Context, tx *sql.Tx, sessionID string) (Lease, bool, error) {
	l, err := scanLease(tx.QueryRowContext(ctx, `SELECT `+leaseCols+` FROM leases WHERE session_id = ?`, sessionID))
	if errors.Is(err, sql.ErrNoRows) {
		return Lease{}, false, nil
	}
	if err != nil {
		// An unreadable owner cannot be checked: treat it as dead.
		_, derr := tx.ExecContext(ctx, `DELETE FROM leases WHERE session_id = ?`, sessionID)
		return Lease{}, false, derr
	}
	if l.live(time.Now()) {
		return l, true, nil
	}
	_, err = tx.ExecContext(ctx, `DELETE FROM leases WHERE session_id = ?`, sessionID)
	return Lease{}, false, err
}

// AcquireLease takes the lease of session sess for this process for ttl,
// or returns a *LeaseHeldError naming its holder. purpose says what holds
// it (e.g. "codeagent run"), for that message.
func (s *Store) AcquireLease(ctx context.Context, sess Session, purpose string, ttl time.Duration) (Lease, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return Lease{}, fmt.Errorf("lease session %q: %w", sess.Name, err)
	}
	defer tx.Rollback()
	held, ok, err := liveLease(ctx, tx, sess.ID)
	if err != nil {
		return Lease{}, fmt.Errorf("lease session %q: %w", sess.Name, err)
	}
	if ok {
		return Lease{}, &LeaseHeldError{Session: sess.Name, Holder: held}
	}
	t := time.Now()
	l := Lease{SessionID: sess.ID, Owner: procid.Self(), Token: newToken(), Purpose: purpose,
		Acquired: fromMillis(t.UnixMilli()), Expires: fromMillis(t.Add(ttl).UnixMilli())}
	if _, err := tx.ExecContext(ctx, `INSERT INTO leases (`+leaseCols+`) VALUES (?, ?, ?, ?, ?, ?)`,
		l.SessionID, l.Owner.String(), l.Token, purpose, l.Acquired.UnixMilli(), l.Expires.UnixMilli()); err != nil {
		return Lease{}, fmt.Errorf("lease session %q: %w", sess.Name, err)
	}
	if err := tx.Commit(); err != nil {
		return Lease{}, fmt.Errorf("lease session %q: %w", sess.Name, err)
	}
	return l, nil
}

// RenewLease extends l for ttl from now, or returns ErrLeaseLost when the
// lease is no longer l's.
func (s *Store) RenewLease(ctx context.Context, l Lease, ttl time.Duration) (Lease, error) {
	exp := time.Now().Add(ttl)
	res, err := s.db.ExecContext(ctx, `UPDATE leases SET expires_at = ? WHERE session_id = ? AND token = ?`,
		exp.UnixMilli(), l.SessionID, l.Token)
	if err != nil {
		return l, fmt.Errorf("renew lease: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return l, ErrLeaseLost
	}
	l.Expires = fromMillis(exp.UnixMilli())
	return l, nil
}

// ReleaseLease gives l up; a lease no longer l's is left alone.
func (s *Store) ReleaseLease(ctx context.Context, l Lease) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM leases WHERE session_id = ? AND token = ?`, l.SessionID, l.Token); err != nil {
		return fmt.Errorf("release lease: %w", err)
	}
	return nil
}

// SessionLease returns the live lease of a session, if any.
func (s *Store) SessionLease(ctx context.Context, sessionID string) (Lease, bool, error) {
	l, err := scanLease(s.db.QueryRowContext(ctx, `SELECT `+leaseCols+` FROM leases WHERE session_id = ?`, sessionID))
	if errors.Is(err, sql.ErrNoRows) {
		return Lease{}, false, nil
	}
	if err != nil {
		return Lease{}, false, nil
	}
	return l, l.live(time.Now()), nil
}

// InterruptRunning marks the turns of a session still marked running as
// interrupted, with reason, and closes each one's run in the audit log
// with an interrupted record. Call it only while holding the session's
// lease, or when no live process holds it: then no turn can be under way.
// It returns the turns it marked.
func (s *Store) InterruptRunning(ctx context.Context, sess Session, reason string) ([]string, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("interrupt turns: %w", err)
	}
	defer tx.Rollback()
	ids, err := interruptIn(ctx, tx, sess, reason)
	if err != nil {
		return nil, fmt.Errorf("interrupt turns: %w", err)
	}
	return ids, tx.Commit()
}

func interruptIn(ctx context.Context, tx *sql.Tx, sess Session, reason string) ([]string, error) {
	rows, err := tx.QueryContext(ctx, `SELECT id FROM turns WHERE session_id = ? AND status = ?`, sess.ID, TurnRunning)
	if err != nil {
		return nil, err
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, err
		}
		ids = append(ids, id)
	}
	rows.Close()
	for _, id := range ids {
		if _, err := tx.ExecContext(ctx, `UPDATE turns SET status = ?, message = ?, finished_at = ? WHERE id = ?`,
			TurnInterrupted, reason, now(), id); err != nil {
			return nil, err
		}
		body := fmt.Appendf(nil, `{"turn":%q,"reason":%q}`, id, reason)
		if _, err := appendAudit(ctx, tx, sess.Name, id, 0, KindInterrupted, body); err != nil {
			return nil, err
		}
	}
	return ids, nil
}

// InterruptOrphans does what InterruptRunning does for every session that
// has running turns and no live lease: the leftovers of processes that
// died. It returns how many turns it marked.
func (s *Store) InterruptOrphans(ctx context.Context, reason string) (int, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("recover turns: %w", err)
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, `SELECT DISTINCT `+sessionCols+` FROM sessions s JOIN turns t ON t.session_id = s.id WHERE t.status = ?`, TurnRunning)
	if err != nil {
		return 0, fmt.Errorf("recover turns: %w", err)
	}
	var sessions []Session
	for rows.Next() {
		sess, err := scanSession(rows)
		if err != nil {
			rows.Close()
			return 0, fmt.Errorf("recover turns: %w", err)
		}
		sessions = append(sessions, sess)
	}
	rows.Close()
	n := 0
	for _, sess := range sessions {
		_, live, err := liveLease(ctx, tx, sess.ID)
		if err != nil {
			return 0, fmt.Errorf("recover turns: %w", err)
		}
		if live {
			continue
		}
		ids, err := interruptIn(ctx, tx, sess, reason)
		if err != nil {
			return 0, fmt.Errorf("recover turns: %w", err)
		}
		n += len(ids)
	}
	return n, tx.Commit()
}
