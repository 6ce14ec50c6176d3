package app

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/codeagent/codeagent/sandbox"
)

// TestProgramSpec: a door's program becomes the same Spec whatever the
// door: written under /code by its name (main + the extension by
// default), the language's command and environment with the request's
// on top, the workspace given.
func TestProgramSpec(t *testing.T) {
	py, err := LookupLanguage("py")
	if err != nil || py.Name != "python" {
		t.Fatalf("LookupLanguage(py) = %v, %v", py.Name, err)
	}
	spec := Program{Lang: py, Code: []byte("print(1)"), Env: map[string]string{"A": "1"}}.Spec("/ws")
	if spec.Workspace != "/ws" || len(spec.Files) != 1 || spec.Files[0].Path != "/code/main.py" ||
		spec.Command[len(spec.Command)-1] != "/code/main.py" || spec.Env["A"] != "1" {
		t.Fatalf("spec = %+v", spec)
	}
	for k, v := range py.Env {
		if spec.Env[k] != v {
			t.Errorf("the language's %s is missing: %q", k, spec.Env[k])
		}
	}
	if _, ok := py.Env["A"]; ok {
		t.Error("the request's environment leaked into the language's")
	}
	named := Program{Lang: py, Name: "tool.py"}.Spec("/ws")
	if named.Files[0].Path != "/code/tool.py" {
		t.Errorf("named program at %s", named.Files[0].Path)
	}
	// The imports hint every door's Python program carries (which lets
	// the namespace backend keep warm interpreters for the programs that
	// use them): known, unknown, and none for another language.
	if got := (Program{Lang: py, Code: []byte("import pandas as pd\nimport json\n")}.Spec("/ws")).Imports; !slices.Equal(got, []string{"json", "pandas"}) {
		t.Errorf("imports = %q, want json and pandas", got)
	}
	if got := spec.Imports; got == nil || len(got) != 0 {
		t.Errorf("imports of print(1) = %#v, want none (known)", got)
	}
	if got := (Program{Lang: py, Code: []byte("__import__('pandas')")}.Spec("/ws")).Imports; got != nil {
		t.Errorf("imports of a dynamic import = %q, want unknown (nil)", got)
	}
	sh, _ := LookupLanguage("bash")
	if got := (Program{Lang: sh, Code: []byte("echo import pandas")}.Spec("/ws")).Imports; got != nil {
		t.Errorf("imports of a bash script = %q, want unknown (nil)", got)
	}
}

// TestProgramRefusals: what no door runs, each refused as the caller's
// to fix (class Invalid).
func TestProgramRefusals(t *testing.T) {
	py, _ := LookupLanguage("python")
	many := map[string]string{}
	for i := 0; i <= MaxEnv; i++ {
		many["V"+strings.Repeat("x", i)] = ""
	}
	for name, err := range map[string]error{
		"unknown language": func() error { _, err := LookupLanguage("cobol"); return err }(),
		"no language":      Program{Code: []byte("x")}.Validate(),
		"empty code":       Program{Lang: py, Code: []byte(" \n")}.Validate(),
		"env in program":   Program{Lang: py, Code: []byte("1"), Env: map[string]string{"A B": "1"}}.Validate(),
		"limit too low":    Program{Lang: py, Code: []byte("1"), Limits: sandbox.Limits{Memory: 1 << 20}}.Validate(),
		"env name":         CheckEnv(map[string]string{"A=B": "1"}),
		"env NUL":          CheckEnv(map[string]string{"A": "x\x00y"}),
		"too many env":     CheckEnv(many),
		"file dir":         CheckFileNames(map[string]string{"../etc/passwd": ""}),
		"file slash":       CheckFileNames(map[string]int{"a/b": 0}),
	} {
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want an error of class Invalid", name, err)
		}
	}
	if err := CheckEnv(map[string]string{"MPLBACKEND": "Agg"}); err != nil {
		t.Errorf("a plain variable refused: %v", err)
	}
	if err := (Program{Lang: py, Code: []byte("print(1)"), Env: map[string]string{"A": "1"}, Limits: sandbox.DefaultLimits()}).Validate(); err != nil {
		t.Errorf("a plain program refused: %v", err)
	}
}
