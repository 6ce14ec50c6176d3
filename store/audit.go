package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Record is one entry of the audit log: a generated program, a check
// verdict, an execution's start and end, a verification verdict. Data is
// the kind's own JSON object. RunSeq numbers the records of one run (from
// 1), so that a record that could not be written shows as a missing number
// once a later one is; 0 is a record outside any run's numbering.
type Record struct {
	Seq      int64           `json:"seq"`
	Time     time.Time       `json:"time"`
	Session  string          `json:"session"`
	RunID    string          `json:"run_id"`
	RunSeq   int64           `json:"run_seq,omitempty"`
	Kind     string          `json:"kind"`
	Data     json.RawMessage `json:"data"`
	PrevHash string          `json:"prev_hash"`
	Hash     string          `json:"hash"`
}

// genesis is the previous hash of the first record.
const genesis = "0000000000000000000000000000000000000000000000000000000000000000"

// recordHash chains a record to the one before it. Every field a reader
// sees is covered, so changing, inserting or deleting a record breaks the
// chain from there on. A run number is covered when there is one (records
// written before numbering hash as they did).
func recordHash(prev string, seq, ts int64, session, runID string, runSeq int64, kind string, data []byte) string {
	h := sha256.New()
	parts := []string{prev, strconv.FormatInt(seq, 10), strconv.FormatInt(ts, 10), session, runID, kind}
	if runSeq > 0 {
		parts = append(parts, "run_seq="+strconv.FormatInt(runSeq, 10))
	}
	for _, part := range parts {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	h.Write(data)
	return hex.EncodeToString(h.Sum(nil))
}

// Audit appends a record outside any run's numbering. data is marshalled
// to JSON.
func (s *Store) Audit(ctx context.Context, session, runID, kind string, data any) (Record, error) {
	return s.AuditRun(ctx, session, runID, 0, kind, data)
}

// AuditRun appends record number runSeq of a run.
func (s *Store) AuditRun(ctx context.Context, session, runID string, runSeq int64, kind string, data any) (Record, error) {
	body, err := json.Marshal(data)
	if err != nil {
		return Record{}, fmt.Errorf("audit %s: %w", kind, err)
	}
	tx, err := s.db.BeginTx(ctx, nil) // immediate: appends are serialized
	if err != nil {
		return Record{}, fmt.Errorf("audit %s: %w", kind, err)
	}
	defer tx.Rollback()
	r, err := appendAudit(ctx, tx, session, runID, runSeq, kind, body)
	if err != nil {
		return Record{}, fmt.Errorf("audit %s: %w", kind, err)
	}
	if err := tx.Commit(); err != nil {
		return Record{}, fmt.Errorf("audit %s: %w", kind, err)
	}
	return r, nil
}

// appendAudit appends a record in tx, which must be a write transaction.
func appendAudit(ctx context.Context, tx *sql.Tx, session, runID string, runSeq int64, kind string, body []byte) (Record, error) {
	var last sql.NullInt64
	prev := genesis
	var prevHash sql.NullString
	if err := tx.QueryRowContext(ctx, `SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1`).Scan(&last, &prevHash); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return Record{}, err
	}
	if prevHash.Valid {
		prev = prevHash.String
	}
	r := Record{Seq: last.Int64 + 1, Time: time.Now(), Session: session, RunID: runID, RunSeq: runSeq, Kind: kind, Data: body, PrevHash: prev}
	r.Hash = recordHash(prev, r.Seq, r.Time.UnixMilli(), session, runID, runSeq, kind, body)
	if _, err := tx.ExecContext(ctx, `INSERT INTO audit (seq, ts, session, run_id, run_seq, kind, data, prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		r.Seq, r.Time.UnixMilli(), session, runID, runSeq, kind, string(body), prev, r.Hash); err != nil {
		return Record{}, err
	}
	return r, nil
}

// AuditLog returns the records of one session, or of all when session is "".
func (s *Store) AuditLog(ctx context.Context, session string) ([]Record, error) {
	return s.AuditRecords(ctx, AuditFilter{Session: session})
}

// AuditFilter selects records of the audit log; its zero value selects
// them all.
type AuditFilter struct {
	Session string    // the session's name; "" for every session
	Run     string    // a run's ID or the start of one (the 8 characters `codeagent log` shows); "" for every run
	Since   time.Time // records at or after this time; zero for the whole log
	Tail    int       // the last Tail records of those selected; 0 for all
}

// AuditRecords returns the records f selects, oldest first.
func (s *Store) AuditRecords(ctx context.Context, f AuditFilter) ([]Record, error) {
	var where []string
	var args []any
	if f.Session != "" {
		where, args = append(where, `session = ?`), append(args, f.Session)
	}
	if f.Run != "" {
		where, args = append(where, `substr(run_id, 1, length(?)) = ?`), append(args, f.Run, f.Run)
	}
	if !f.Since.IsZero() {
		where, args = append(where, `ts >= ?`), append(args, f.Since.UnixMilli())
	}
	q := `SELECT seq, ts, session, run_id, run_seq, kind, data, prev_hash, hash FROM audit`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, ` AND `)
	}
	if f.Tail > 0 {
		// The newest Tail, in the log's order again.
		q = `SELECT * FROM (` + q + ` ORDER BY seq DESC LIMIT ?)`
		args = append(args, f.Tail)
	}
	rows, err := s.db.QueryContext(ctx, q+` ORDER BY seq`, args...)
	if err != nil {
		return nil, fmt.Errorf("read audit log: %w", err)
	}
	defer rows.Close()
	var out []Record
	for rows.Next() {
		var r Record
		var ts int64
		var data string
		if err := rows.Scan(&r.Seq, &ts, &r.Session, &r.RunID, &r.RunSeq, &r.Kind, &data, &r.PrevHash, &r.Hash); err != nil {
			return nil, err
		}
		r.Time, r.Data = fromMillis(ts), json.RawMessage(data)
		out = append(out, r)
	}
	return out, rows.Err()
}

// ChainError says where the audit chain breaks.
type ChainError struct {
	Seq    int64
	Reason string
}

func (e *ChainError) Error() string {
	return fmt.Sprintf("audit log tampered with at record %d: %s", e.Seq, e.Reason)
}

// VerifyAudit recomputes the whole chain and returns the number of records
// checked, or a *ChainError at the first record that does not match.
func (s *Store) VerifyAudit(ctx context.Context) (int, error) {
	recs, err := s.AuditLog(ctx, "")
	if err != nil {
		return 0, err
	}
	prev := genesis
	for i, r := range recs {
		switch {
		case r.Seq != int64(i+1):
			return i, &ChainError{Seq: r.Seq, Reason: fmt.Sprintf("expected record %d: records were deleted or inserted", i+1)}
		case r.PrevHash != prev:
			return i, &ChainError{Seq: r.Seq, Reason: "it does not follow the record before"}
		case recordHash(prev, r.Seq, r.Time.UnixMilli(), r.Session, r.RunID, r.RunSeq, r.Kind, r.Data) != r.Hash:
			return i, &ChainError{Seq: r.Seq, Reason: "its content does not match its hash"}
		}
		prev = r.Hash
	}
	return len(recs), nil
}

// CountAudit counts the records of a kind for a session since a time.
func (s *Store) CountAudit(ctx context.Context, session, kind string, since time.Time) (int, error) {
	var n int
	err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM audit WHERE session = ? AND kind = ? AND ts >= ?`,
		session, kind, since.UnixMilli()).Scan(&n)
	return n, err
}
