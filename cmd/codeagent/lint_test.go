package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckLintWarnings: the real binary's check reports an undefined name
// as a warning, in its human output and in --json with kind "lint", and
// the file stays clean: exit status 0, "safe" true.
func TestCheckLintWarnings(t *testing.T) {
	dir := t.TempDir()
	file := writeCheckFile(t, dir, "stats.py", "def mean(xs):\n    return sum(xs) / len(xss)\n\nprint(mean([1, 2, 3]))\n")
	code, stdout, stderr := runBinary(t, dir, nil, "check", file)
	if code != exitOK {
		t.Fatalf("exit %d, want %d (warnings do not fail a check)\nstdout %s\nstderr %s", code, exitOK, stdout, stderr)
	}
	if want := filepath.Base(file) + ":2:26 warning undefined-name undefined name 'xss'"; !strings.Contains(stdout, want) {
		t.Errorf("human output lacks %q:\n%s", want, stdout)
	}
	code, stdout, stderr = runBinary(t, dir, nil, "check", "--json", "stats.py")
	if code != exitOK {
		t.Fatalf("--json: exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	var res struct {
		Files []struct {
			Safe     bool
			Findings []map[string]any
			Lint     []struct{ Rule, Message, Kind string }
		}
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	if len(res.Files) != 1 || !res.Files[0].Safe || len(res.Files[0].Findings) != 0 || len(res.Files[0].Lint) != 1 {
		t.Fatalf("got %s", stdout)
	}
	if l := res.Files[0].Lint[0]; l.Rule != "undefined-name" || l.Kind != "lint" || l.Message != "undefined name 'xss'" {
		t.Errorf("lint finding %+v", l)
	}
	// A finding still fails the check, with the warning beside it.
	bad := writeCheckFile(t, dir, "bad.py", "import subprocess\nprint(undefined_thing)\n")
	if code, stdout, _ := runBinary(t, dir, nil, "check", bad); code != exitFailure ||
		!strings.Contains(stdout, "forbidden-import") || !strings.Contains(stdout, "warning undefined-name") {
		t.Errorf("exit %d, want %d with both:\n%s", code, exitFailure, stdout)
	}
}

// TestRunLintReachesModel: the model's first program uses a name it never
// defines; the program still runs (and fails), and the model's next
// request carries the lint warning (rule and name) with the run's error.
func TestRunLintReachesModel(t *testing.T) {
	srv, flags := modelServer(t,
		pyAnswer("def total(xs):\n    return sum(xs) + offst\n\nprint(total([1, 2, 3]))\n"),
		pyAnswer("print(sum([1, 2, 3]))\n"),
	)
	args := append(append([]string{"run"}, flags...), "--no-verify", "--no-folder", "--json", "print the sum of 1, 2 and 3")
	code, stdout, stderr := runBinary(t, "", []string{"CODEAGENT_PROVIDER=", "OPENAI_API_KEY="}, args...)
	if code != exitOK {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	var res struct {
		Success bool
		History []struct {
			Check      []struct{ Rule, Kind string }
			ErrorClass string `json:"error_class"`
		}
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	if !res.Success || len(res.History) != 2 || res.History[0].ErrorClass != "name" {
		t.Fatalf("the first program did not run and fail on its name: %s", stdout)
	}
	if c := res.History[0].Check; len(c) != 1 || c[0].Rule != "undefined-name" || c[0].Kind != "lint" {
		t.Errorf("attempt 1's check: %+v, want the lint warning", c)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	second := reqs[1].Text()
	for _, want := range []string{"undefined name 'offst' [undefined-name]", "NameError"} {
		if !strings.Contains(second, want) {
			t.Errorf("the second request lacks %q:\n%s", want, second)
		}
	}
}
