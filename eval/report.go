package eval

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
)

// Summary aggregates the records of one configuration.
type Summary struct {
	Suite         string `json:"suite"`
	Model         string `json:"model"`
	Mode          Mode   `json:"mode"`
	MaxIterations int    `json:"max_iterations"`
	// Tasks is how many tasks the suite selection holds; Scored how many
	// have a record. Rates are over Scored.
	Tasks  int `json:"tasks"`
	Scored int `json:"scored"`
	// PassAt[k-1] counts tasks whose code passed by attempt k.
	PassAt []Rate `json:"pass_at"`
	// Final counts tasks whose final code passes.
	Final        Rate    `json:"final"`
	AgentSuccess Rate    `json:"agent_success"`
	MeanAttempts float64 `json:"mean_attempts"`
	// ErrorClasses counts the classes of failed attempts; ScoreClasses why
	// final code failed the hidden tests.
	ErrorClasses map[string]int `json:"error_classes"`
	ScoreClasses map[string]int `json:"score_classes"`
	// Errors are tasks that could not be run to their end.
	Errors        int      `json:"errors"`
	Tokens        int64    `json:"tokens"`
	TokensPerTask float64  `json:"tokens_per_task"`
	WallMSPerTask float64  `json:"wall_ms_per_task"`
	WallMSMax     int64    `json:"wall_ms_max"`
	Failed        []string `json:"failed"`
	// ElapsedMS is the evaluation's own wall time, when known.
	ElapsedMS int64 `json:"elapsed_ms,omitempty"`
}

// Rate is a count of passing tasks and its share of the scored ones.
type Rate struct {
	Passed int     `json:"passed"`
	Rate   float64 `json:"rate"`
}

func (r Rate) String() string {
	return fmt.Sprintf("%.1f%% (%d)", 100*r.Rate, r.Passed)
}

// Summarize aggregates recs (the latest per task, of one configuration)
// over a selection of tasks tasks long.
func Summarize(suite string, key Key, tasks int, recs []Record) Summary {
	s := Summary{Suite: suite, Model: key.Model, Mode: key.Mode, MaxIterations: key.MaxIterations, Tasks: tasks,
		Scored: len(recs), PassAt: make([]Rate, max(key.MaxIterations, 1)),
		ErrorClasses: map[string]int{}, ScoreClasses: map[string]int{}, Failed: []string{}}
	attempts := 0
	var wall int64
	for _, r := range recs {
		for k := range s.PassAt {
			if r.FirstPassAttempt > 0 && r.FirstPassAttempt <= k+1 {
				s.PassAt[k].Passed++
			}
		}
		if r.Passed {
			s.Final.Passed++
		} else {
			s.Failed = append(s.Failed, r.TaskID)
			if r.ScoreClass != "" {
				s.ScoreClasses[string(r.ScoreClass)]++
			}
		}
		if r.AgentSuccess {
			s.AgentSuccess.Passed++
		}
		if r.Error != "" {
			s.Errors++
		}
		for _, c := range r.ErrorClasses {
			s.ErrorClasses[string(c)]++
		}
		attempts += r.Attempts
		s.Tokens += r.Tokens
		wall += r.WallMS
		s.WallMSMax = max(s.WallMSMax, r.WallMS)
	}
	if n := float64(len(recs)); n > 0 {
		for k := range s.PassAt {
			s.PassAt[k].Rate = float64(s.PassAt[k].Passed) / n
		}
		s.Final.Rate = float64(s.Final.Passed) / n
		s.AgentSuccess.Rate = float64(s.AgentSuccess.Passed) / n
		s.MeanAttempts = float64(attempts) / n
		s.TokensPerTask = float64(s.Tokens) / n
		s.WallMSPerTask = float64(wall) / n
	}
	return s
}

// WriteJSON writes the summary as one indented JSON object.
func (s Summary) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(s); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return nil
}

// WriteMarkdown writes the summary as a Markdown section with one table.
func (s Summary) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "## %s · %s · feedback %s · up to %d attempt(s)\n\n", s.Suite, s.Model, s.Mode, s.MaxIterations)
	head := []string{"tasks"}
	for k := range s.PassAt {
		head = append(head, fmt.Sprintf("pass@attempt %d", k+1))
	}
	head = append(head, "final", "mean attempts", "tokens/task", "wall/task")
	row := []string{scoredOf(s)}
	for _, r := range s.PassAt {
		row = append(row, r.String())
	}
	row = append(row, s.Final.String(), fmt.Sprintf("%.2f", s.MeanAttempts), fmt.Sprintf("%.0f", s.TokensPerTask), seconds(s.WallMSPerTask))
	writeTable(&b, head, [][]string{row})
	b.WriteString("\n")
	fmt.Fprintf(&b, "- error classes of failed attempts: %s\n", classes(s.ErrorClasses))
	fmt.Fprintf(&b, "- why final code failed the tests: %s\n", classes(s.ScoreClasses))
	fmt.Fprintf(&b, "- the agent's own verdict: success on %s; longest task %s; %d tokens in all",
		s.AgentSuccess, seconds(float64(s.WallMSMax)), s.Tokens)
	if s.ElapsedMS > 0 {
		fmt.Fprintf(&b, "; this run took %s", seconds(float64(s.ElapsedMS)))
	}
	b.WriteString("\n")
	if s.Errors > 0 {
		fmt.Fprintf(&b, "- %d task(s) could not be run to the end; run again with the same --results to retry them\n", s.Errors)
	}
	if len(s.Failed) > 0 {
		shown := s.Failed
		if len(shown) > 30 {
			shown = shown[:30]
		}
		fmt.Fprintf(&b, "- failed: %s", strings.Join(shown, ", "))
		if len(s.Failed) > len(shown) {
			fmt.Fprintf(&b, " and %d more", len(s.Failed)-len(shown))
		}
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func scoredOf(s Summary) string {
	if s.Scored == s.Tasks {
		return fmt.Sprint(s.Tasks)
	}
	return fmt.Sprintf("%d of %d", s.Scored, s.Tasks)
}

func classes(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if m[keys[i]] != m[keys[j]] {
			return m[keys[i]] > m[keys[j]]
		}
		return keys[i] < keys[j]
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

func seconds(ms float64) string {
	return (time.Duration(ms) * time.Millisecond).Round(100 * time.Millisecond).String()
}

func writeTable(b *strings.Builder, head []string, rows [][]string) {
	b.WriteString("| " + strings.Join(head, " | ") + " |\n|")
	for range head {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, r := range rows {
		b.WriteString("| " + strings.Join(r, " | ") + " |\n")
	}
}
