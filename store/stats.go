package store

import (
	"context"
	"fmt"
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
	if st.Turns > 0 {
		st.AttemptsPerTurn = float64(st.Attempts) / float64(st.Turns)
		st.FirstTrySuccess = float64(st.FirstTry) / float64(st.Turns)
		st.OverallSuccesses = float64(st.Succeeded) / float64(st.Turns)
	}
	return st, rows.Err()
}
