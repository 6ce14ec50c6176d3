package eval

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
)

// SamplesModelPrefix starts the model label of records scored from a
// samples file: "samples:" and the file's base name.
const SamplesModelPrefix = "samples:"

// sampleLine is one line of a samples file, the reference harness's input:
// a completion of a task's prompt (or a whole module; see Scorer.Score).
type sampleLine struct {
	TaskID     *string `json:"task_id"`
	Completion *string `json:"completion"`
}

// ReadSamples reads a samples file: JSONL of {task_id, completion}, other
// fields ignored. A task's completions are its samples 0, 1, ... in the
// file's order, as the reference numbers them. Every task id must be one
// of tasks'.
func ReadSamples(name string, tasks []Task) (map[string][]string, error) {
	known := map[string]bool{}
	for _, t := range tasks {
		known[t.ID] = true
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("samples: %w", err)
	}
	defer f.Close()
	out := map[string][]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var s sampleLine
		if err := json.Unmarshal(line, &s); err != nil {
			return nil, fmt.Errorf("%s:%d: not a sample: %v", name, n, err)
		}
		switch {
		case s.TaskID == nil || s.Completion == nil:
			return nil, fmt.Errorf("%s:%d: a sample needs task_id and completion", name, n)
		case !known[*s.TaskID]:
			return nil, fmt.Errorf("%s:%d: no task %q in the task file", name, n, *s.TaskID)
		}
		out[*s.TaskID] = append(out[*s.TaskID], *s.Completion)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("%s: a line is longer than %d MiB", name, maxLine>>20)
		}
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no samples", name)
	}
	return out, nil
}

// WithSamples returns the tasks that have samples, in the suite's order,
// and the most samples any of them has.
func WithSamples(tasks []Task, samples map[string][]string) ([]Task, int) {
	var out []Task
	most := 0
	for _, t := range tasks {
		if n := len(samples[t.ID]); n > 0 {
			out = append(out, t)
			most = max(most, n)
		}
	}
	return out, most
}

// AttachSamples gives each job its completion, dropping the jobs of
// samples a task does not have.
func AttachSamples(jobs []Job, samples map[string][]string) []Job {
	out := jobs[:0:0]
	for _, j := range jobs {
		if cs := samples[j.Task.ID]; j.Sample < len(cs) {
			j.Code = cs[j.Sample]
			out = append(out, j)
		}
	}
	return out
}
