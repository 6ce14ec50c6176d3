package eval

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"time"

	"github.com/codeagent/codeagent/agent"
)

// Record is the outcome of one task, one JSON line of a results file.
type Record struct {
	TaskID string `json:"task_id"`
	// Sample numbers the independent samples of a task from 0 (records
	// written before samples existed read as sample 0).
	Sample        int    `json:"sample"`
	Suite         string `json:"suite"`
	Model         string `json:"model"`
	Mode          Mode   `json:"mode"`
	MaxIterations int    `json:"max_iterations"`
	// Passed: the hidden tests pass on the final code.
	Passed bool `json:"passed"`
	// FirstPassAttempt is the first attempt whose code passes the hidden
	// tests; 0 when none does.
	FirstPassAttempt int `json:"first_pass_attempt"`
	Attempts         int `json:"attempts"`
	// AgentSuccess is the agent's own verdict (its run, tests, checks).
	AgentSuccess bool `json:"agent_success"`
	// ErrorClasses are the classes of the agent's failed attempts (and of
	// rejected test rounds in self mode), in order.
	ErrorClasses []agent.ErrorClass `json:"error_classes"`
	// ScoreClass and ScoreOutput say why the final code failed the tests.
	ScoreClass  agent.ErrorClass `json:"score_class,omitempty"`
	ScoreOutput string           `json:"score_output,omitempty"`
	// Coverage is the percent of the final code's lines that the agent's
	// own tests ran (self mode, when the agent succeeded and coverage was
	// measured).
	Coverage *float64 `json:"coverage,omitempty"`
	// ScoredForm is the program a HumanEval task scored: "module" (the
	// answer alone) or "completion" (the prompt, then the answer).
	ScoredForm string `json:"scored_form,omitempty"`
	// CodeSHA256 is the hash of the final code exactly as scored (the
	// code is not recorded: it may hold secrets).
	CodeSHA256 string `json:"code_sha256,omitempty"`
	// ScoreSettings are the limits the code was scored with.
	ScoreSettings string `json:"score_settings,omitempty"`
	Requests      int    `json:"requests"`
	InputTokens   int64  `json:"input_tokens"`
	OutputTokens  int64  `json:"output_tokens"`
	Tokens        int64  `json:"tokens"`
	// WallMS is the task's whole time; AgentMS and ScoreMS its parts.
	WallMS  int64 `json:"wall_ms"`
	AgentMS int64 `json:"agent_ms"`
	ScoreMS int64 `json:"score_ms"`
	// Error says why the task could not be run to its end (the provider
	// failed after its retries, the task timed out); such tasks are run
	// again on resume.
	Error string    `json:"error,omitempty"`
	Time  time.Time `json:"time"`
}

// Key identifies the configuration an outcome belongs to: results of
// other models, modes or budgets in the same file are kept apart.
type Key struct {
	Model         string
	Mode          Mode
	MaxIterations int
}

// Key returns the record's configuration.
func (r Record) Key() Key { return Key{r.Model, r.Mode, r.MaxIterations} }

func (k Key) String() string {
	return fmt.Sprintf("%s · feedback %s · up to %d attempt(s)", k.Model, k.Mode, k.MaxIterations)
}

// ReadResults reads a results file; a missing file is no records. A line
// that does not parse is skipped only when it is the last one (a write cut
// short by a crash); elsewhere it is an error with its line number.
func ReadResults(name string) ([]Record, error) {
	b, err := os.ReadFile(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("results: %w", err)
	}
	var recs []Record
	lines := bytes.Split(b, []byte("\n"))
	for i, line := range lines {
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		var r Record
		err := json.Unmarshal(line, &r)
		if err == nil && (r.TaskID == "" || r.MaxIterations < 1 || r.Sample < 0) {
			err = errors.New("no task_id or max_iterations, or a negative sample")
		}
		if err == nil {
			_, err = ParseMode(string(r.Mode))
		}
		if err != nil {
			if i >= len(lines)-2 && !bytes.HasSuffix(b, []byte("\n")) {
				break // the cut-off tail of an interrupted write
			}
			return nil, fmt.Errorf("%s:%d: not a result record: %v", name, i+1, err)
		}
		recs = append(recs, r)
	}
	return recs, nil
}

// sampleKey identifies one sample of one task.
type sampleKey struct {
	task   string
	sample int
}

// Latest keeps the last record of each sample of each task for key, in
// first-seen order.
func Latest(recs []Record, key Key) []Record {
	idx := map[sampleKey]int{}
	var out []Record
	for _, r := range recs {
		if r.Key() != key {
			continue
		}
		k := sampleKey{r.TaskID, r.Sample}
		if i, ok := idx[k]; ok {
			out[i] = r
			continue
		}
		idx[k] = len(out)
		out = append(out, r)
	}
	return out
}

// ResultsFile appends records to a JSONL file with one write per line, so
// that every finished task survives the process being killed. Safe for
// concurrent use.
type ResultsFile struct {
	mu sync.Mutex
	f  *os.File
}

// OpenResults opens name for appending, creating it if needed. A file that
// ends in a cut-off line is first completed with a newline so that the
// next record starts on its own line.
func OpenResults(name string) (*ResultsFile, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("results: %w", err)
	}
	if fi, err := f.Stat(); err == nil && fi.Size() > 0 {
		last := make([]byte, 1)
		if _, err := f.ReadAt(last, fi.Size()-1); err == nil && last[0] != '\n' {
			if _, err := f.Write([]byte("\n")); err != nil {
				f.Close()
				return nil, fmt.Errorf("results: %w", err)
			}
		}
	}
	return &ResultsFile{f: f}, nil
}

// Append writes one record as a line.
func (w *ResultsFile) Append(r Record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("results: %w", err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, err := w.f.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("results: %w", err)
	}
	return nil
}

// Close flushes the file to disk and closes it.
func (w *ResultsFile) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	serr := w.f.Sync()
	if err := w.f.Close(); err != nil {
		return fmt.Errorf("results: %w", err)
	}
	if serr != nil {
		return fmt.Errorf("results: %w", serr)
	}
	return nil
}

// readAll reads several results files, for comparisons; each must hold
// records.
func readAll(names []string) ([][]Record, error) {
	out := make([][]Record, len(names))
	for i, n := range names {
		recs, err := ReadResults(n)
		if err != nil {
			return nil, err
		}
		if len(recs) == 0 {
			return nil, fmt.Errorf("results %s: no records", n)
		}
		out[i] = recs
	}
	return out, nil
}
