package store

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"
)

// Stats summarises the turns of one session.
type Stats struct {
	Session          string         `json:"session"`
	Turns            int            `json:"turns"`
	Succeeded        int            `json:"succeeded"`
	FirstTry         int            `json:"first_try"` // succeeded at attempt 1
	Attempts         int            `json:"attempts"`
	ErrorClasses     map[string]int `json:"error_classes"`
	ModelTime        time.Duration  `json:"model_ns"`
	SandboxTime      time.Duration  `json:"sandbox_ns"`
	ExecWall         time.Duration  `json:"exec_wall_ns"`
	ExecCPU          time.Duration  `json:"exec_cpu_ns"`
	PeakMemory       int64          `json:"peak_memory_bytes"` // the largest of any execution
	InputTokens      int64          `json:"input_tokens"`
	OutputTokens     int64          `json:"output_tokens"`
	AttemptsPerTurn  float64        `json:"attempts_per_turn"`
	FirstTrySuccess  float64        `json:"first_try_success_rate"`
	OverallSuccesses float64        `json:"success_rate"`
	// FromAuditLog marks the figures of runs outside any session, read
	// from the audit log, which has no tokens (StatsOutsideSessions).
	FromAuditLog bool `json:"from_audit_log,omitempty"`
}

// SessionStats computes the Stats of a session.
func (s *Store) SessionStats(ctx context.Context, sessionID, name string) (Stats, error) {
	st := Stats{Session: name, ErrorClasses: map[string]int{}}
	var modelMS, sandboxMS int64
	err := s.db.QueryRowContext(ctx, `SELECT COUNT(*),
		COALESCE(SUM(status = 'succeeded'), 0), COALESCE(SUM(status = 'succeeded' AND attempts = 1), 0),
		COALESCE(SUM(attempts), 0), COALESCE(SUM(model_ms), 0), COALESCE(SUM(sandbox_ms), 0),
		COALESCE(SUM(input_tokens), 0), COALESCE(SUM(output_tokens), 0)
		FROM turns WHERE session_id = ?`, sessionID).Scan(&st.Turns, &st.Succeeded, &st.FirstTry, &st.Attempts,
		&modelMS, &sandboxMS, &st.InputTokens, &st.OutputTokens)
	if err != nil {
		return Stats{}, fmt.Errorf("session stats: %w", err)
	}
	st.ModelTime, st.SandboxTime = time.Duration(modelMS)*time.Millisecond, time.Duration(sandboxMS)*time.Millisecond
	var wall, cpu int64
	if err := s.db.QueryRowContext(ctx, `SELECT COALESCE(SUM(a.wall_ms), 0), COALESCE(SUM(a.cpu_ms), 0), COALESCE(MAX(a.peak_memory), 0)
		FROM attempts a JOIN turns t ON a.turn_id = t.id WHERE t.session_id = ?`, sessionID).Scan(&wall, &cpu, &st.PeakMemory); err != nil {
		return Stats{}, fmt.Errorf("session stats: %w", err)
	}
	st.ExecWall, st.ExecCPU = time.Duration(wall)*time.Millisecond, time.Duration(cpu)*time.Millisecond
	rows, err := s.db.QueryContext(ctx, `SELECT a.error_class, COUNT(*) FROM attempts a JOIN turns t ON a.turn_id = t.id
		WHERE t.session_id = ? AND a.error_class != '' GROUP BY a.error_class`, sessionID)
	if err != nil {
		return Stats{}, fmt.Errorf("session stats: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var class string
		var n int
		if err := rows.Scan(&class, &n); err != nil {
			return Stats{}, err
		}
		st.ErrorClasses[class] = n
	}
	st.rates()
	return st, rows.Err()
}

// rates computes the rates of st from its counts.
func (st *Stats) rates() {
	if st.Turns > 0 {
		st.AttemptsPerTurn = float64(st.Attempts) / float64(st.Turns)
		st.FirstTrySuccess = float64(st.FirstTry) / float64(st.Turns)
		st.OverallSuccesses = float64(st.Succeeded) / float64(st.Turns)
	}
}

// StatsOutsideSessions computes the Stats of the runs made outside any
// session, which have no turns: `codeagent run` without --session (their
// records name no session) and an MCP session's run_task (they name the
// MCP session, mcp-ID, and begin with a run_task record). One Stats for
// each such name, "" first. They come from the runs' audit records, which
// hold no tokens (FromAuditLog): the time in the sandbox is the wall time
// of their executions, an attempt's error class the last one its
// generation, check or execution gave. Runs of a removed session are not
// counted, as its turns are not.
func (s *Store) StatsOutsideSessions(ctx context.Context) ([]Stats, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT session, run_id, kind, data FROM audit
		WHERE run_id != '' AND substr(run_id, 1, 5) != 'exec-' AND run_id NOT IN (SELECT id FROM turns)
		AND (session = '' OR run_id IN (SELECT run_id FROM audit WHERE kind = 'run_task'))
		ORDER BY seq`)
	if err != nil {
		return nil, fmt.Errorf("stats outside sessions: %w", err)
	}
	defer rows.Close()
	runs := map[string]*auditRun{}
	var order []*auditRun
	for rows.Next() {
		var label, id, kind, data string
		if err := rows.Scan(&label, &id, &kind, &data); err != nil {
			return nil, fmt.Errorf("stats outside sessions: %w", err)
		}
		r := runs[id]
		if r == nil {
			r = &auditRun{label: label, classes: map[int]string{}}
			runs[id] = r
			order = append(order, r)
		}
		r.add(kind, data)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("stats outside sessions: %w", err)
	}
	byLabel := map[string]*Stats{}
	var out []Stats
	var labels []string
	for _, r := range order {
		st := byLabel[r.label]
		if st == nil {
			st = &Stats{Session: r.label, ErrorClasses: map[string]int{}, FromAuditLog: true}
			byLabel[r.label] = st
			labels = append(labels, r.label)
		}
		r.addTo(st)
	}
	sort.Strings(labels) // "" first
	for _, l := range labels {
		st := byLabel[l]
		st.rates()
		out = append(out, *st)
	}
	return out, nil
}

// auditRun is what the audit records of one run add up to.
type auditRun struct {
	label            string
	attempts         int
	success          bool
	model, wall, cpu time.Duration
	peak             int64
	classes          map[int]string // attempt: its last error class
}

// add counts one record of the run, as session.Recorder counts the events
// it records.
func (r *auditRun) add(kind, data string) {
	var d struct {
		Attempt    int    `json:"attempt"`
		Success    bool   `json:"success"`
		Safe       bool   `json:"safe"`
		ErrorClass string `json:"error_class"`
		ModelMS    int64  `json:"model_ms"`
		WallMS     int64  `json:"wall_ms"`
		CPUMS      int64  `json:"cpu_ms"`
		PeakMemory int64  `json:"peak_memory_bytes"`
	}
	if json.Unmarshal([]byte(data), &d) != nil {
		return
	}
	r.attempts = max(r.attempts, d.Attempt)
	r.model += time.Duration(d.ModelMS) * time.Millisecond
	switch kind {
	case "generated", "executed", "replayed":
		r.classes[d.Attempt] = d.ErrorClass
	case "checked":
		if !d.Safe {
			r.classes[d.Attempt] = d.ErrorClass
		}
	case KindExecEnd:
		r.wall += time.Duration(d.WallMS) * time.Millisecond
		r.cpu += time.Duration(d.CPUMS) * time.Millisecond
		r.peak = max(r.peak, d.PeakMemory)
	case "done":
		r.success = d.Success
	}
}

// addTo adds the run to st.
func (r *auditRun) addTo(st *Stats) {
	st.Turns++
	st.Attempts += r.attempts
	if r.success {
		st.Succeeded++
		if r.attempts == 1 {
			st.FirstTry++
		}
	}
	st.ModelTime += r.model
	st.SandboxTime += r.wall
	st.ExecWall += r.wall
	st.ExecCPU += r.cpu
	st.PeakMemory = max(st.PeakMemory, r.peak)
	for _, c := range r.classes {
		if c != "" {
			st.ErrorClasses[c]++
		}
	}
}
