// Package eval measures the agent on benchmark suites: it loads tasks
// (HumanEval JSONL, or codeagent's own format with input files and a pytest
// acceptance test), runs the agent on each with a bounded pool of workers
// sharing one sandbox and one checker, scores the code of every attempt with
// the task's hidden tests in the sandbox, appends one JSON line per finished
// task (so that an interrupted evaluation resumes), and renders pass rates
// at attempt 1..K, attempts, error classes, tokens and time as Markdown or
// JSON.
//
// The hidden tests never reach the model, except as the failing output fed
// back in the tests feedback mode.
package eval

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/codeagent/codeagent/internal/lazyre"
	"github.com/codeagent/codeagent/workspace"
)

// Format is how a task is scored.
type Format string

// Task formats.
const (
	// FormatHumanEval: the model writes a module defining EntryPoint; the
	// task's test code (defining check) runs against it.
	FormatHumanEval Format = "humaneval"
	// FormatCodeagent: the program runs in a workspace holding the input
	// files, then the pytest acceptance test runs there.
	FormatCodeagent Format = "codeagent"
)

// Bounds on what a task file may bring in.
const (
	maxLine      = 8 << 20  // one JSONL line
	maxInputFile = 64 << 20 // one input file
	maxTaskBytes = 256 << 20
)

// Task is one benchmark task.
type Task struct {
	ID     string
	Format Format
	// Prompt is what the model is asked; it never holds the tests.
	Prompt string
	// EntryPoint is the function HumanEval's check is called with.
	EntryPoint string
	// PromptCode is HumanEval's prompt as the task file has it: the code an
	// answer completes. An answer that does not bind every top-level name
	// it binds is scored as PromptCode + answer, as the reference does.
	PromptCode string
	// Test is the hidden test code: HumanEval's check, or a pytest file.
	Test string
	// Files are the inputs copied into the workspace.
	Files []File
	// Timeout bounds each scoring run; 0 means the runner's default.
	Timeout time.Duration
	// Tags classify the task (e.g. grouping, chart); informational.
	Tags []string
	// Line is the task's line in its file, for messages.
	Line int
}

// File is an input file of a task.
type File struct {
	Name string
	Data []byte
}

// Suite is a loaded task file.
type Suite struct {
	// Name is the file's base name without extension, e.g. humaneval.
	Name  string
	Tasks []Task
}

// humanEvalLine is one line of HumanEval JSONL; other fields
// (canonical_solution) are ignored.
type humanEvalLine struct {
	TaskID     *string `json:"task_id"`
	Prompt     *string `json:"prompt"`
	EntryPoint *string `json:"entry_point"`
	Test       *string `json:"test"`
}

// codeagentLine is one line of codeagent's format. Paths are relative to
// the task file's directory.
type codeagentLine struct {
	ID       string   `json:"id"`
	Task     string   `json:"task"`
	Files    []string `json:"files"`
	TestFile string   `json:"test_file"`
	Timeout  string   `json:"timeout"`
	Tags     []string `json:"tags"`
}

// LoadFile loads the task file at name (JSONL in either format, detected
// per line); input and test files are read relative to its directory and
// may not leave it.
func LoadFile(name string) (*Suite, error) {
	abs, err := filepath.Abs(name)
	if err != nil {
		return nil, fmt.Errorf("tasks %s: %w", name, err)
	}
	s, err := Load(os.DirFS(filepath.Dir(abs)), filepath.Base(abs))
	if err != nil {
		return nil, err
	}
	return s, nil
}

// Load loads the task file name from fsys; see LoadFile.
func Load(fsys fs.FS, name string) (*Suite, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, fmt.Errorf("tasks: %w", err)
	}
	defer f.Close()
	s := &Suite{Name: strings.TrimSuffix(path.Base(name), path.Ext(name))}
	seen := map[string]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	total := int64(0)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		t, err := parseLine(fsys, path.Dir(name), line)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, n, err)
		}
		if first, dup := seen[t.ID]; dup {
			return nil, fmt.Errorf("%s:%d: task id %q repeats the task on line %d", name, n, t.ID, first)
		}
		seen[t.ID] = n
		t.Line = n
		for _, f := range t.Files {
			total += int64(len(f.Data))
		}
		if total > maxTaskBytes {
			return nil, fmt.Errorf("%s:%d: the input files add up to more than %d MiB", name, n, maxTaskBytes>>20)
		}
		s.Tasks = append(s.Tasks, t)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("%s: a line is longer than %d MiB", name, maxLine>>20)
		}
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(s.Tasks) == 0 {
		return nil, fmt.Errorf("%s: no tasks", name)
	}
	return s, nil
}

// parseLine reads one task, in whichever format its fields say.
func parseLine(fsys fs.FS, dir string, line []byte) (Task, error) {
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(line, &probe); err != nil {
		return Task{}, fmt.Errorf("not a JSON object: %w", err)
	}
	if _, ok := probe["task_id"]; ok {
		return parseHumanEval(line)
	}
	if _, ok := probe["id"]; ok {
		return parseCodeagent(fsys, dir, line)
	}
	return Task{}, errors.New(`neither a HumanEval task (task_id, prompt, entry_point, test) nor a codeagent task (id, task, files, test_file)`)
}

var identifier = lazyre.New(`^[A-Za-z_][A-Za-z0-9_]*$`)

func parseHumanEval(line []byte) (Task, error) {
	var h humanEvalLine
	if err := json.Unmarshal(line, &h); err != nil {
		return Task{}, fmt.Errorf("HumanEval task: %w", err)
	}
	var missing []string
	for _, f := range []struct {
		name string
		v    *string
	}{{"task_id", h.TaskID}, {"prompt", h.Prompt}, {"entry_point", h.EntryPoint}, {"test", h.Test}} {
		if f.v == nil || strings.TrimSpace(*f.v) == "" {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return Task{}, fmt.Errorf("HumanEval task: missing or empty field %s", strings.Join(missing, ", "))
	}
	if err := checkID(*h.TaskID); err != nil {
		return Task{}, err
	}
	if !identifier.MatchString(*h.EntryPoint) {
		return Task{}, fmt.Errorf("task %s: entry_point %q is not a Python identifier", *h.TaskID, *h.EntryPoint)
	}
	if !strings.Contains(*h.Test, "def check(") {
		return Task{}, fmt.Errorf("task %s: test defines no check(candidate) function", *h.TaskID)
	}
	return Task{
		ID: *h.TaskID, Format: FormatHumanEval, EntryPoint: *h.EntryPoint, Test: *h.Test, PromptCode: *h.Prompt,
		Prompt: humanEvalPrompt(*h.Prompt, *h.EntryPoint),
	}, nil
}

// humanEvalPrompt asks for the whole module, so that the answer is a
// complete program as the agent expects.
func humanEvalPrompt(prompt, entry string) string {
	return fmt.Sprintf("Complete this Python function. Answer with the whole module: its imports, any helper "+
		"functions, and `%s` itself at module level, implemented as the docstring specifies. It is imported as a "+
		"module and %s is called by tests; do not read input, and put any demonstration under "+
		"`if __name__ == \"__main__\":`.\n\n```python\n%s```", entry, entry, prompt)
}

func parseCodeagent(fsys fs.FS, dir string, line []byte) (Task, error) {
	var c codeagentLine
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return Task{}, fmt.Errorf("codeagent task: %w", err)
	}
	if err := checkID(c.ID); err != nil {
		return Task{}, err
	}
	switch {
	case strings.TrimSpace(c.Task) == "":
		return Task{}, fmt.Errorf("task %s: missing or empty field task", c.ID)
	case c.TestFile == "":
		return Task{}, fmt.Errorf("task %s: missing field test_file (the pytest acceptance test)", c.ID)
	}
	t := Task{ID: c.ID, Format: FormatCodeagent, Prompt: c.Task, Tags: c.Tags}
	if c.Timeout != "" {
		d, err := time.ParseDuration(c.Timeout)
		if err != nil || d <= 0 {
			return Task{}, fmt.Errorf("task %s: timeout %q is not a positive duration such as 60s", c.ID, c.Timeout)
		}
		t.Timeout = d
	}
	test, err := readRel(fsys, dir, c.TestFile)
	if err != nil {
		return Task{}, fmt.Errorf("task %s: test_file: %w", c.ID, err)
	}
	t.Test = string(test)
	names := map[string]bool{}
	for _, rel := range c.Files {
		name := path.Base(rel)
		if !workspace.ValidName(name) || name == "solution.py" || name == "test_solution.py" {
			return Task{}, fmt.Errorf("task %s: input file name %q is not usable in the workspace", c.ID, name)
		}
		if names[name] {
			return Task{}, fmt.Errorf("task %s: two input files are called %s", c.ID, name)
		}
		names[name] = true
		data, err := readRel(fsys, dir, rel)
		if err != nil {
			return Task{}, fmt.Errorf("task %s: files: %w", c.ID, err)
		}
		t.Files = append(t.Files, File{Name: name, Data: data})
	}
	return t, nil
}

var idPattern = lazyre.New(`^[A-Za-z0-9][A-Za-z0-9_./:-]{0,127}$`)

func checkID(id string) error {
	if !idPattern.MatchString(id) {
		return fmt.Errorf("task id %q: want letters, digits and _ . / : - (at most 128)", id)
	}
	return nil
}

// readRel reads a file named relative to dir, refusing paths that leave it.
func readRel(fsys fs.FS, dir, rel string) ([]byte, error) {
	p := path.Join(dir, rel)
	if path.IsAbs(rel) || !fs.ValidPath(p) || strings.HasPrefix(path.Clean(rel), "..") {
		return nil, fmt.Errorf("%q must be a path inside the task file's directory", rel)
	}
	f, err := fsys.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxInputFile+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", rel, err)
	}
	if len(b) > maxInputFile {
		return nil, fmt.Errorf("%s is larger than %d MiB", rel, maxInputFile>>20)
	}
	return b, nil
}
