package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/codeagent/codeagent/llm/llmtest"
	"github.com/codeagent/codeagent/store"
)

// TestStatsCountsEveryRun: stats counts the runs made without --session
// too (it showed only sessions' turns, so that `codeagent run "..."`
// never appeared), apart from the sessions' and named so; --session
// narrows to one session.
func TestStatsCountsEveryRun(t *testing.T) {
	data := t.TempDir()
	done := llmtest.Say(`{"task_complete": true, "missing": ""}`)
	_, flags := modelServer(t,
		pyAnswer("print(6 * 7)\n"), done, // without a session: succeeds
		pyAnswer("raise SystemExit(3)\n"), pyAnswer("raise SystemExit(3)\n"), // without a session: fails twice
		pyAnswer("print('sales')\n"), done, // in the session sales
	)
	runs := [][]string{
		{"run", "--data-dir", data, "print the answer"},
		{"run", "--data-dir", data, "--max-iterations", "2", "--no-verify", "exit 3"},
		{"run", "--data-dir", data, "--session", "sales", "print sales"},
	}
	for i, args := range runs {
		want := 0
		if i == 1 {
			want = exitFailure
		}
		last := len(args) - 1
		args = append(append(args[:last:last], flags...), args[last])
		if code, out, errOut := runCLI(t, "", args...); code != want {
			t.Fatalf("%v: exit %d, want %d\n%s\n%s", args, code, want, out, errOut)
		}
	}
	code, out, errOut := runCLI(t, "", "stats", "--data-dir", data, "--json")
	var all []store.Stats
	if err := json.Unmarshal([]byte(out), &all); code != 0 || err != nil {
		t.Fatalf("stats --json: exit %d, %v, %s", code, err, errOut)
	}
	if len(all) != 2 {
		t.Fatalf("stats --json: %d entries, want the session and the runs without one: %s", len(all), out)
	}
	sales, none := all[0], all[1]
	if sales.Session != "sales" || sales.Turns != 1 || sales.Succeeded != 1 || sales.FromAuditLog {
		t.Errorf("the session: %+v", sales)
	}
	if none.Session != "" || !none.FromAuditLog || none.Turns != 2 || none.Succeeded != 1 || none.FirstTry != 1 ||
		none.Attempts != 3 || none.ErrorClasses["runtime"] != 2 || none.ModelTime <= 0 || none.ExecWall <= 0 {
		t.Errorf("the runs without a session: %+v", none)
	}
	code, out, _ = runCLI(t, "", "stats", "--data-dir", data)
	if code != 0 || !strings.Contains(out, "session sales\n  tasks:              1 (1 succeeded") ||
		!strings.Contains(out, "runs without a session\n  tasks:              2 (1 succeeded, 50%)") ||
		!strings.Contains(out, "tokens:             not recorded outside sessions") {
		t.Errorf("stats: exit %d:\n%s", code, out)
	}
	code, out, _ = runCLI(t, "", "stats", "--data-dir", data, "--session", "sales")
	if code != 0 || !strings.Contains(out, "session sales") || strings.Contains(out, "without a session") {
		t.Errorf("stats --session sales: exit %d:\n%s", code, out)
	}

	// An MCP session's runs are named by its label, as in the log.
	st, err := store.Open(context.Background(), filepath.Join(data, "codeagent.db"))
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"run_task", "done"} {
		if _, err := st.Audit(context.Background(), "mcp-7", "run7", kind, map[string]any{"success": true}); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()
	code, out, _ = runCLI(t, "", "stats", "--data-dir", data, "--session", "mcp-7")
	if code != 0 || !strings.HasPrefix(out, "session mcp-7 (MCP)\n  tasks:              1 (1 succeeded") || strings.Contains(out, "sales") {
		t.Errorf("stats --session mcp-7: exit %d:\n%s", code, out)
	}
}
