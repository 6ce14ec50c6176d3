package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

func openTest(t *testing.T) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "codeagent.db")
	s, err := Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, path
}

func TestMigrationsAreIdempotent(t *testing.T) {
	s, path := openTest(t)
	s.Close()
	s2, err := Open(context.Background(), path)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer s2.Close()
	var v int
	if err := s2.db.QueryRow("PRAGMA user_version").Scan(&v); err != nil || v != 4 {
		t.Fatalf("schema version %d, %v", v, err)
	}
	var mode string
	if err := s2.db.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		t.Fatalf("journal mode %q, %v", mode, err)
	}
}

func TestNewerSchemaIsRefused(t *testing.T) {
	s, path := openTest(t)
	if _, err := s.db.Exec("PRAGMA user_version = 99"); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := Open(context.Background(), path); err == nil {
		t.Fatal("opened a store with a newer schema")
	}
}

func TestSessionsAndTurns(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	sess, err := s.CreateSession(ctx, "sales", "/tmp/ws")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateSession(ctx, "sales", "/tmp/other"); err == nil {
		t.Fatal("duplicate session name accepted")
	}
	turn, err := s.BeginTurn(ctx, sess.ID, "top products")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.AddAttempt(ctx, turn.ID, Attempt{N: 1, Code: "print(x)", Status: "error", ExitCode: 1, ErrorClass: "name", Wall: 20 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if err := s.AddAttempt(ctx, turn.ID, Attempt{N: 2, Code: "print(1)", Status: "ok", Findings: json.RawMessage(`[{"rule":"x"}]`)}); err != nil {
		t.Fatal(err)
	}
	turn.Status, turn.Code, turn.Output, turn.Attempts = TurnSucceeded, "print(1)", "1\n", 2
	turn.Artifacts = []Artifact{{Path: "plot.png", Size: 10, SHA256: "ab"}}
	if err := s.FinishTurn(ctx, turn); err != nil {
		t.Fatal(err)
	}
	second, err := s.BeginTurn(ctx, sess.ID, "by region")
	if err != nil || second.Seq != 2 {
		t.Fatalf("second turn seq %d, %v", second.Seq, err)
	}
	if err := s.MarkInterrupted(ctx, sess.ID); err != nil {
		t.Fatal(err)
	}
	turns, err := s.Turns(ctx, sess.ID)
	if err != nil || len(turns) != 2 {
		t.Fatalf("turns %v, %v", turns, err)
	}
	if turns[0].Status != TurnSucceeded || turns[0].Output != "1\n" || len(turns[0].Artifacts) != 1 || turns[1].Status != TurnInterrupted {
		t.Fatalf("turns %+v", turns)
	}
	atts, err := s.Attempts(ctx, turn.ID)
	if err != nil || len(atts) != 2 || atts[0].ErrorClass != "name" || atts[0].Wall != 20*time.Millisecond || string(atts[1].Findings) != `[{"rule":"x"}]` {
		t.Fatalf("attempts %+v, %v", atts, err)
	}
	st, err := s.SessionStats(ctx, sess.ID, "sales")
	if err != nil || st.Turns != 2 || st.Succeeded != 1 || st.Attempts != 2 || st.ErrorClasses["name"] != 1 || st.FirstTry != 0 || st.AttemptsPerTurn != 1 {
		t.Fatalf("stats %+v, %v", st, err)
	}
	got, err := s.SessionByName(ctx, "sales")
	if err != nil || got.Turns != 2 || got.Workspace != "/tmp/ws" {
		t.Fatalf("session %+v, %v", got, err)
	}
	if err := s.DeleteSession(ctx, "sales"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SessionByName(ctx, "sales"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleted session: %v", err)
	}
	if atts, _ := s.Attempts(ctx, turn.ID); len(atts) != 0 {
		t.Fatalf("attempts survived their session")
	}
}

func TestPrune(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	old, _ := s.CreateSession(ctx, "old", "/a")
	s.CreateSession(ctx, "new", "/b")
	s.db.Exec(`UPDATE sessions SET updated_at = ? WHERE id = ?`, time.Now().Add(-10*24*time.Hour).UnixMilli(), old.ID)
	names, skipped, err := s.PruneSessions(ctx, time.Now().Add(-7*24*time.Hour), nil)
	if err != nil || len(names) != 1 || names[0] != "old" || len(skipped) != 0 {
		t.Fatalf("pruned %v, skipped %v, %v", names, skipped, err)
	}
	left, _ := s.Sessions(ctx)
	if len(left) != 1 || left[0].Name != "new" {
		t.Fatalf("left %v", left)
	}
}

func TestAuditChainDetectsTampering(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		tamper string
		at     int64
	}{
		{"edited data", `UPDATE audit SET data = '{"status":"ok"}' WHERE seq = 3`, 3},
		{"edited kind", `UPDATE audit SET kind = 'verified' WHERE seq = 2`, 2},
		{"deleted record", `DELETE FROM audit WHERE seq = 2`, 3},
		{"rehashed record", `UPDATE audit SET data = '{}', hash = 'x' WHERE seq = 4`, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := openTest(t)
			for i := range 5 {
				if _, err := s.Audit(ctx, "sales", "run1", "executed", map[string]any{"status": "error", "i": i}); err != nil {
					t.Fatal(err)
				}
			}
			if n, err := s.VerifyAudit(ctx); err != nil || n != 5 {
				t.Fatalf("intact chain: %d, %v", n, err)
			}
			if _, err := s.db.Exec(tc.tamper); err != nil {
				t.Fatal(err)
			}
			_, err := s.VerifyAudit(ctx)
			var ce *ChainError
			if !errors.As(err, &ce) || ce.Seq != tc.at {
				t.Fatalf("tampering not detected at %d: %v", tc.at, err)
			}
		})
	}
}

func TestConcurrentAudit(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 25 {
				if _, err := s.Audit(ctx, fmt.Sprint("s", w), "r", "executed", i); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if n, err := s.VerifyAudit(ctx); err != nil || n != 100 {
		t.Fatalf("chain after concurrent appends: %d, %v", n, err)
	}
	if recs, _ := s.AuditLog(ctx, "s2"); len(recs) != 25 {
		t.Fatalf("session filter: %d records", len(recs))
	}
}

// TestKillDuringWrites kills a process with SIGKILL while it writes turns,
// attempts and audit records, then checks that the store opens, passes
// SQLite's integrity check and the audit chain, and takes new writes.
func TestKillDuringWrites(t *testing.T) {
	if os.Getenv("STORE_WRITER") != "" {
		writeForever(os.Getenv("STORE_WRITER"))
		return
	}
	path := filepath.Join(t.TempDir(), "codeagent.db")
	cmd := exec.Command(os.Args[0], "-test.run", "^TestKillDuringWrites$")
	cmd.Env = append(os.Environ(), "STORE_WRITER="+path)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if fi, err := os.Stat(path + "-wal"); err == nil && fi.Size() > 64<<10 {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatal("the writer wrote nothing")
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()

	ctx := context.Background()
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatalf("reopen after kill: %v", err)
	}
	defer s.Close()
	var check string
	if err := s.db.QueryRow("PRAGMA integrity_check").Scan(&check); err != nil || check != "ok" {
		t.Fatalf("integrity check: %q, %v", check, err)
	}
	n, err := s.VerifyAudit(ctx)
	if err != nil || n == 0 {
		t.Fatalf("audit chain after kill: %d records, %v", n, err)
	}
	sess, err := s.SessionByName(ctx, "killed")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.MarkInterrupted(ctx, sess.ID); err != nil {
		t.Fatal(err)
	}
	turns, _ := s.Turns(ctx, sess.ID)
	for _, tr := range turns {
		if tr.Status == TurnRunning {
			t.Fatalf("turn %d still running", tr.Seq)
		}
	}
	if _, err := s.Audit(ctx, "killed", "next", "executed", "after"); err != nil {
		t.Fatalf("write after kill: %v", err)
	}
	if _, err := s.VerifyAudit(ctx); err != nil {
		t.Fatal(err)
	}
}

// writeForever is the child of TestKillDuringWrites; it never returns
// normally (bounded at 60 s in case nobody kills it).
func writeForever(path string) {
	ctx := context.Background()
	s, err := Open(ctx, path)
	if err != nil {
		os.Exit(3)
	}
	sess, err := s.CreateSession(ctx, "killed", "/tmp/ws")
	if err != nil {
		os.Exit(4)
	}
	stop := time.Now().Add(60 * time.Second)
	for i := 0; time.Now().Before(stop); i++ {
		turn, err := s.BeginTurn(ctx, sess.ID, fmt.Sprint("task ", i))
		if err != nil {
			os.Exit(5)
		}
		for n := 1; n <= 3; n++ {
			s.AddAttempt(ctx, turn.ID, Attempt{N: n, Code: fmt.Sprintf("print(%d)", n), Status: "ok"})
			s.Audit(ctx, "killed", turn.ID, "executed", map[string]int{"attempt": n})
		}
		turn.Status = TurnSucceeded
		s.FinishTurn(ctx, turn)
	}
	os.Exit(0)
}
