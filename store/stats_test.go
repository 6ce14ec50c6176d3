package store

import (
	"context"
	"testing"
)

// TestStatsOutsideSessions: the runs outside any session are those
// without a turn that name no session (a CLI run) or are an MCP
// session's run_task, one Stats per name; executions (exec-*), a
// session's turns and the runs of a removed session (even one named as
// an MCP session is) are not among them.
func TestStatsOutsideSessions(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	audit := func(label, run, kind string, data map[string]any) {
		t.Helper()
		if _, err := s.Audit(ctx, label, run, kind, data); err != nil {
			t.Fatal(err)
		}
	}
	run := func(label, id string, attempts int, success bool) {
		for a := 1; a <= attempts; a++ {
			audit(label, id, "generated", map[string]any{"attempt": a, "model_ms": 10, "error_class": ""})
			audit(label, id, KindExecEnd, map[string]any{"exec": a, "wall_ms": 100, "cpu_ms": 50, "peak_memory_bytes": 1 << 20})
			class := ""
			if a < attempts || !success {
				class = "runtime"
			}
			audit(label, id, "executed", map[string]any{"attempt": a, "error_class": class})
		}
		audit(label, id, "done", map[string]any{"success": success})
	}
	run("", "cli1", 1, true)
	run("", "cli2", 3, false)
	audit("mcp-abc", "mcp1", "run_task", map[string]any{"task": "t"})
	run("mcp-abc", "mcp1", 2, true)
	run("", "exec-1", 1, true) // an execution, not a run
	turnIn := func(name string) string {
		t.Helper()
		sess, err := s.CreateSession(ctx, name, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		turn, err := s.BeginTurn(ctx, sess.ID, "task")
		if err != nil {
			t.Fatal(err)
		}
		return turn.ID
	}
	run("sales", turnIn("sales"), 1, true)       // a turn
	run("mcp-gone", turnIn("mcp-gone"), 1, true) // a turn of a session then removed
	if err := s.DeleteSession(ctx, "mcp-gone"); err != nil {
		t.Fatal(err)
	}
	run("sales-removed", "old2", 1, true) // a removed session's run, its turn gone

	got, err := s.StatsOutsideSessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Session != "" || got[1].Session != "mcp-abc" {
		t.Fatalf("stats for %d names: %+v", len(got), got)
	}
	cli, mcp := got[0], got[1]
	if cli.Turns != 2 || cli.Succeeded != 1 || cli.FirstTry != 1 || cli.Attempts != 4 || cli.ErrorClasses["runtime"] != 3 ||
		cli.ModelTime.Milliseconds() != 40 || cli.ExecWall.Milliseconds() != 400 || cli.ExecCPU.Milliseconds() != 200 ||
		cli.PeakMemory != 1<<20 || !cli.FromAuditLog || cli.AttemptsPerTurn != 2 {
		t.Errorf("CLI runs: %+v", cli)
	}
	if mcp.Turns != 1 || mcp.Succeeded != 1 || mcp.FirstTry != 0 || mcp.Attempts != 2 || mcp.ErrorClasses["runtime"] != 1 {
		t.Errorf("MCP runs: %+v", mcp)
	}
}
