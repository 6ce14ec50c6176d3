package eval

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
)

func TestLoadHumanEval(t *testing.T) {
	s, err := LoadFile(humanEvalPath)
	if err != nil {
		t.Skipf("HumanEval not available: %v", err)
	}
	if s.Name != "humaneval" || len(s.Tasks) != 164 {
		t.Fatalf("suite %s with %d tasks", s.Name, len(s.Tasks))
	}
	t0 := s.Tasks[0]
	if t0.ID != "HumanEval/0" || t0.Format != FormatHumanEval || t0.EntryPoint != "has_close_elements" || t0.Line != 1 {
		t.Errorf("task 0: %+v", t0)
	}
	if !strings.Contains(t0.Prompt, "def has_close_elements(") || strings.Contains(t0.Prompt, "def check(") || strings.Contains(t0.Prompt, "canonical") {
		t.Errorf("the prompt must hold the function and not the tests:\n%s", t0.Prompt)
	}
}

func TestLoadCodeagentFormat(t *testing.T) {
	fsys := fstest.MapFS{
		"suite/tasks.jsonl":        {Data: []byte("# a comment\n\n" + `{"id": "sum", "task": "Sum the column.", "files": ["data/in.csv"], "test_file": "tests/test_sum.py", "timeout": "45s", "tags": ["grouping"]}` + "\n")},
		"suite/data/in.csv":        {Data: []byte("x\n1\n2\n")},
		"suite/tests/test_sum.py":  {Data: []byte("def test_sum():\n    assert True\n")},
		"suite/tests/test_none.py": {Data: []byte("")},
	}
	s, err := Load(fsys, "suite/tasks.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	task := s.Tasks[0]
	if s.Name != "tasks" || task.ID != "sum" || task.Format != FormatCodeagent || task.Line != 3 || task.Timeout.String() != "45s" ||
		len(task.Files) != 1 || task.Files[0].Name != "in.csv" || string(task.Files[0].Data) != "x\n1\n2\n" ||
		!strings.Contains(task.Test, "def test_sum") || task.Prompt != "Sum the column." || task.Tags[0] != "grouping" {
		t.Errorf("task %+v", task)
	}
}

// Loader errors name the file, the line and what is wrong.
func TestLoadErrors(t *testing.T) {
	he := `{"task_id": "T/1", "prompt": "def f():\n", "entry_point": "f", "test": "def check(c):\n    pass\n"}`
	for _, c := range []struct{ name, data, want string }{
		{"malformed", he + "\n{not json\n", "tasks.jsonl:2: not a JSON object"},
		{"missing fields", `{"task_id": "T/1", "prompt": "x"}`, "tasks.jsonl:1: HumanEval task: missing or empty field entry_point, test"},
		{"no check", `{"task_id": "T/1", "prompt": "x", "entry_point": "f", "test": "assert 1"}`, "defines no check"},
		{"bad entry point", `{"task_id": "T/1", "prompt": "x", "entry_point": "f()", "test": "def check(c): pass"}`, "not a Python identifier"},
		{"duplicate", he + "\n" + he + "\n", "tasks.jsonl:2: task id \"T/1\" repeats the task on line 1"},
		{"bad id", `{"task_id": "../x y", "prompt": "x", "entry_point": "f", "test": "def check(c): pass"}`, "task id"},
		{"neither", `{"name": "x"}`, "neither a HumanEval task"},
		{"empty", "\n# nothing\n", "no tasks"},
		{"unknown field", `{"id": "a", "task": "t", "test_file": "t.py", "tests": "x"}`, `unknown field "tests"`},
		{"no test file", `{"id": "a", "task": "t"}`, "missing field test_file"},
		{"no task", `{"id": "a", "task": " ", "test_file": "t.py"}`, "missing or empty field task"},
		{"missing test file", `{"id": "a", "task": "t", "test_file": "nope.py"}`, "test_file: open"},
		{"escaping path", `{"id": "a", "task": "t", "test_file": "t.py", "files": ["../secret"]}`, "inside the task file's directory"},
		{"absolute path", `{"id": "a", "task": "t", "test_file": "/etc/passwd"}`, "inside the task file's directory"},
		{"bad name", `{"id": "a", "task": "t", "test_file": "t.py", "files": ["solution.py"]}`, "not usable in the workspace"},
		{"bad timeout", `{"id": "a", "task": "t", "test_file": "t.py", "timeout": "soon"}`, "not a positive duration"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			os.WriteFile(filepath.Join(dir, "t.py"), []byte("def test_x(): pass\n"), 0o644)
			os.WriteFile(filepath.Join(dir, "solution.py"), []byte("x"), 0o644)
			os.WriteFile(filepath.Join(filepath.Dir(dir), "secret"), []byte("x"), 0o644)
			p := filepath.Join(dir, "tasks.jsonl")
			if err := os.WriteFile(p, []byte(c.data), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := LoadFile(p)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want %q", err, c.want)
			}
		})
	}
	if _, err := LoadFile(filepath.Join(t.TempDir(), "missing.jsonl")); err == nil {
		t.Error("a missing task file loaded")
	}
}
