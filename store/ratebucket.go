package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// TakeToken takes one token from the bucket key, shared by every process
// of the store: perMinute tokens a minute, at most perMinute held (a full
// bucket at first). When none is there it reserves the next one if it
// comes within maxWait and says how long to wait for it; otherwise it
// takes nothing and ok is false, with wait the time until one would be
// there. This is the token bucket of golang.org/x/time/rate, kept in a row.
func (s *Store) TakeToken(ctx context.Context, key string, perMinute int, maxWait time.Duration) (wait time.Duration, ok bool, err error) {
	if perMinute <= 0 {
		return 0, false, fmt.Errorf("rate bucket %s: perMinute must be positive", key)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, false, fmt.Errorf("rate limit: %w", err)
	}
	defer tx.Rollback()
	t := time.Now().UnixMilli()
	tokens, err := bucketTokens(ctx, tx, key, perMinute, t)
	if err != nil {
		return 0, false, fmt.Errorf("rate limit: %w", err)
	}
	perMS := float64(perMinute) / 60000
	if tokens < 1 {
		wait = time.Duration((1-tokens)/perMS) * time.Millisecond
		if wait > maxWait {
			return wait, false, nil
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO rate_buckets (key, tokens, updated_at) VALUES (?, ?, ?)
		ON CONFLICT (key) DO UPDATE SET tokens = excluded.tokens, updated_at = excluded.updated_at`, key, tokens-1, t); err != nil {
		return 0, false, fmt.Errorf("rate limit: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return 0, false, fmt.Errorf("rate limit: %w", err)
	}
	return wait, true, nil
}

// ReturnToken gives back a token taken for an execution that did not run.
func (s *Store) ReturnToken(ctx context.Context, key string, perMinute int) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("rate limit: %w", err)
	}
	defer tx.Rollback()
	t := time.Now().UnixMilli()
	tokens, err := bucketTokens(ctx, tx, key, perMinute, t)
	if err != nil {
		return fmt.Errorf("rate limit: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE rate_buckets SET tokens = ?, updated_at = ? WHERE key = ?`,
		min(tokens+1, float64(perMinute)), t, key); err != nil {
		return fmt.Errorf("rate limit: %w", err)
	}
	return tx.Commit()
}

// bucketTokens is the bucket's content at t (unix milliseconds).
func bucketTokens(ctx context.Context, tx *sql.Tx, key string, perMinute int, t int64) (float64, error) {
	var tokens float64
	var at int64
	err := tx.QueryRowContext(ctx, `SELECT tokens, updated_at FROM rate_buckets WHERE key = ?`, key).Scan(&tokens, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return float64(perMinute), nil
	}
	if err != nil {
		return 0, err
	}
	if t > at {
		tokens += float64(t-at) * float64(perMinute) / 60000
	}
	return min(tokens, float64(perMinute)), nil
}
