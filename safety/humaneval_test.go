package safety

import (
	"bufio"
	"encoding/json"
	"os"
	"testing"
)

// humanEvalPath is the shared HumanEval data set, by relative path from this
// package (the project keeps no copy of it).
const humanEvalPath = "../../shared/data/humaneval.jsonl"

// TestHumanEval: of the 164 HumanEval tasks (prompt + canonical solution +
// test), only HumanEval/160, which really calls eval, has findings.
func TestHumanEval(t *testing.T) {
	f, err := os.Open(humanEvalPath)
	if err != nil {
		if testing.Short() {
			t.Skipf("HumanEval data not available: %v", err)
		}
		t.Fatalf("HumanEval data set is required for this test: %v (expected at %s relative to the safety package; run with -short to skip)", err, humanEvalPath)
	}
	defer f.Close()
	c := newTestChecker(t)
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	total, clean := 0, 0
	for sc.Scan() {
		var task struct {
			TaskID   string `json:"task_id"`
			Prompt   string `json:"prompt"`
			Solution string `json:"canonical_solution"`
			Test     string `json:"test"`
		}
		if err := json.Unmarshal(sc.Bytes(), &task); err != nil {
			t.Fatalf("line %d: %v", total+1, err)
		}
		total++
		code := task.Prompt + task.Solution + "\n" + task.Test
		r := check(t, c, Python, code)
		switch {
		case task.TaskID == "HumanEval/160":
			if !hasRule(r, RuleForbiddenBuiltin) {
				t.Errorf("%s calls eval but got %v", task.TaskID, r.Findings)
			}
		case !r.Safe():
			t.Errorf("%s: false alarm:\n%s", task.TaskID, formatFindings(r.Findings))
		default:
			clean++
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if total != 164 {
		t.Errorf("read %d tasks, want 164", total)
	}
	t.Logf("HumanEval: %d of %d tasks clean", clean, total)
	if clean != 163 {
		t.Errorf("%d tasks clean, want 163", clean)
	}
}

func hasRule(r Report, rule string) bool {
	for _, f := range r.Findings {
		if f.Rule == rule {
			return true
		}
	}
	return false
}
