package store

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/codeagent/codeagent/procid"
)

// otherProcess starts a process that lives until the test ends and
// returns its owner: a live holder that is not this process.
func otherProcess(t *testing.T) procid.Owner {
	t.Helper()
	cmd := exec.Command("sleep", "600")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	o := procid.Self()
	o.PID, o.Start = cmd.Process.Pid, procid.StartTime(cmd.Process.Pid)
	return o
}

// deadProcess returns the owner of a process that has ended.
func deadProcess(t *testing.T) procid.Owner {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	o := procid.Self()
	o.PID, o.Start = cmd.Process.Pid, procid.StartTime(cmd.Process.Pid)
	cmd.Wait()
	if o.Start == "" {
		o.Start = "1"
	}
	return o
}

func plantLease(t *testing.T, s *Store, sessionID string, o procid.Owner, expires time.Time) {
	t.Helper()
	if _, err := s.db.Exec(`INSERT OR REPLACE INTO leases (`+leaseCols+`) VALUES (?, ?, 'tok', 'codeagent run', ?, ?)`,
		sessionID, o.String(), time.Now().UnixMilli(), expires.UnixMilli()); err != nil {
		t.Fatal(err)
	}
}

// TestLease: a live holder's lease is refused with its name, even when
// expired; a dead holder's is taken over at once; removal and pruning
// leave a held session alone.
func TestLease(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	sess, _ := s.CreateSession(ctx, "busy", "/tmp/ws")
	other := otherProcess(t)
	plantLease(t, s, sess.ID, other, time.Now().Add(-time.Minute))
	_, err := s.AcquireLease(ctx, sess, "codeagent run", time.Minute)
	var held *LeaseHeldError
	if !errors.As(err, &held) || held.Holder.Owner != other || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", other.PID)) {
		t.Fatalf("a live holder's lease: %v", err)
	}
	if err := s.DeleteSession(ctx, "busy"); !errors.As(err, &held) {
		t.Fatalf("delete of a held session: %v", err)
	}
	s.db.Exec(`UPDATE sessions SET updated_at = 0`)
	names, skipped, err := s.PruneSessions(ctx, time.Now(), func(Session) error { t.Fatal("removed a held session's files"); return nil })
	if err != nil || len(names) != 0 || len(skipped) != 1 || skipped[0].Session != "busy" {
		t.Fatalf("prune: %v %v %v", names, skipped, err)
	}

	plantLease(t, s, sess.ID, deadProcess(t), time.Now().Add(time.Hour))
	l, err := s.AcquireLease(ctx, sess, "codeagent run", time.Minute)
	if err != nil || l.Owner != procid.Self() {
		t.Fatalf("a dead holder's lease: %+v %v", l, err)
	}
	if _, err := s.AcquireLease(ctx, sess, "codeagent run", time.Minute); !errors.As(err, &held) {
		t.Fatalf("a second holding in one process: %v", err)
	}
	if l2, err := s.RenewLease(ctx, l, time.Minute); err != nil || !l2.Expires.After(l.Acquired) {
		t.Fatalf("renew: %v", err)
	}
	if err := s.ReleaseLease(ctx, l); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RenewLease(ctx, l, time.Minute); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("renew after release: %v", err)
	}
}

// TestInterruptOrphans marks the running turns of sessions without a live
// holder, and closes their runs in the audit log; a live holder's turns
// stay running.
func TestInterruptOrphans(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	live, _ := s.CreateSession(ctx, "live", "/a")
	dead, _ := s.CreateSession(ctx, "dead", "/b")
	lt, _ := s.BeginTurn(ctx, live.ID, "x")
	dt, _ := s.BeginTurn(ctx, dead.ID, "y")
	plantLease(t, s, live.ID, otherProcess(t), time.Now().Add(time.Minute))
	plantLease(t, s, dead.ID, deadProcess(t), time.Now().Add(time.Minute))
	n, err := s.InterruptOrphans(ctx, "gone")
	if err != nil || n != 1 {
		t.Fatalf("interrupted %d, %v", n, err)
	}
	got, _ := s.TurnByID(ctx, dt.ID)
	if got.Status != TurnInterrupted || got.Message != "gone" {
		t.Fatalf("the dead holder's turn: %+v", got)
	}
	if got, _ := s.TurnByID(ctx, lt.ID); got.Status != TurnRunning {
		t.Fatalf("the live holder's turn: %s", got.Status)
	}
	recs, _ := s.AuditLog(ctx, "dead")
	if len(recs) != 1 || recs[0].Kind != KindInterrupted || recs[0].RunID != dt.ID {
		t.Fatalf("audit %+v", recs)
	}
}

// TestTokenBucketShared: two stores on one file share a session's limit;
// a wait that fits is reserved, one that does not is refused.
func TestTokenBucketShared(t *testing.T) {
	ctx := context.Background()
	a, path := openTest(t)
	b, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var mu sync.Mutex
	admitted := 0
	var wg sync.WaitGroup
	for _, st := range []*Store{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 10 {
				if wait, ok, err := st.TakeToken(ctx, "k", 10, 0); err == nil && ok && wait == 0 {
					mu.Lock()
					admitted++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if admitted != 10 {
		t.Fatalf("admitted %d of 20 at a limit of 10", admitted)
	}
	wait, ok, _ := a.TakeToken(ctx, "k", 10, time.Second)
	if ok || wait < 5*time.Second || wait > 6*time.Second {
		t.Fatalf("over the limit: wait %v ok %v", wait, ok)
	}
	wait, ok, _ = a.TakeToken(ctx, "k", 10, 10*time.Second)
	if !ok || wait < 5*time.Second {
		t.Fatalf("a wait that fits: %v %v", wait, ok)
	}
	if err := a.ReturnToken(ctx, "k", 10); err != nil {
		t.Fatal(err)
	}
	if wait, ok, _ := a.TakeToken(ctx, "k", 10, 10*time.Second); !ok || wait > 6*time.Second {
		t.Fatalf("after a returned token: %v %v", wait, ok)
	}
}

// TestAuditGaps: a hole in a run's numbers and an execution without an
// end whose process is gone are gaps; with an interrupted record the
// latter is explained; one of a live process is under way.
func TestAuditGaps(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	start := func(run string, seq int64, owner procid.Owner) {
		s.AuditRun(ctx, "s", run, seq, KindExecStart, map[string]any{"exec": 1, "owner": owner.String()})
	}
	// Intact: 1, 2, 3 with start and end.
	s.AuditRun(ctx, "s", "ok", 1, "generated", map[string]any{})
	start("ok", 2, deadProcess(t))
	s.AuditRun(ctx, "s", "ok", 3, KindExecEnd, map[string]any{"exec": 1})
	// A hole: 1, then 4.
	s.AuditRun(ctx, "s", "holes", 1, "generated", map[string]any{})
	s.AuditRun(ctx, "s", "holes", 4, "done", map[string]any{})
	// A start without an end, its process dead.
	start("dead", 1, deadProcess(t))
	// The same, closed by an interrupted record.
	start("intr", 1, deadProcess(t))
	s.Audit(ctx, "s", "intr", KindInterrupted, map[string]any{})
	// Under way.
	start("live", 1, procid.Self())
	gaps, err := s.AuditGaps(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Gap{}
	for _, g := range gaps {
		got[g.RunID] = g
	}
	if len(gaps) != 3 || !strings.Contains(got["holes"].Reason, "records 2 to 3") || got["holes"].Explained ||
		!strings.Contains(got["dead"].Reason, "is gone") || got["dead"].Explained || !got["intr"].Explained {
		t.Fatalf("gaps %+v", gaps)
	}
	if _, err := s.VerifyAudit(ctx); err != nil {
		t.Fatalf("the chain of numbered records: %v", err)
	}
}
