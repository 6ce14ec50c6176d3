package kernel

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

func newManager(t *testing.T, max int, idle time.Duration) *Manager {
	t.Helper()
	m := NewManager(ManagerConfig{Options: Options{Sandbox: testSandbox(t)}, Max: max, IdleTimeout: idle})
	t.Cleanup(m.Close)
	return m
}

func mexec(t *testing.T, m *Manager, key Key, ws, code string) Result {
	t.Helper()
	res, err := m.Exec(context.Background(), key, ws, Cell{Code: code})
	if err != nil {
		t.Fatalf("%v: %v", key, err)
	}
	return res
}

// TestManagerKeys checks that a kernel serves one key: another owner's
// session of the same name, or another session of the same owner, has a
// kernel of its own, and a key keeps its workspace.
func TestManagerKeys(t *testing.T) {
	m := newManager(t, 8, time.Hour)
	a, b, c := Key{"alice", "s1"}, Key{"bob", "s1"}, Key{"alice", "s2"}
	wsA, wsB, wsC := t.TempDir(), t.TempDir(), t.TempDir()
	mexec(t, m, a, wsA, "secret = 'alice-only'\nopen('mine.txt', 'w').write('a')")
	for _, k := range []struct {
		key Key
		ws  string
	}{{b, wsB}, {c, wsC}} {
		res := mexec(t, m, k.key, k.ws, "import os\n('secret' in globals(), os.listdir('.'))")
		if plain(res) != "(False, [])" {
			t.Fatalf("%v sees %q", k.key, plain(res))
		}
	}
	if res := mexec(t, m, a, wsA, "secret"); plain(res) != "'alice-only'" {
		t.Fatalf("alice's kernel lost its state: %q", plain(res))
	}
	if _, err := m.Exec(context.Background(), a, wsB, Cell{Code: "1"}); !errors.Is(err, ErrWorkspace) {
		t.Fatalf("a key's kernel given another workspace: %v", err)
	}
	if st := m.Stats(); st.Live != 3 || st.RSSBytes <= 0 || st.Cells != 4 {
		t.Fatalf("stats %+v", st)
	}
}

// TestManagerCap checks the cap on live kernels: the least recently used
// idle kernel is evicted (and its next cell says so); when every kernel is
// busy, Exec fails with a BusyError at once.
func TestManagerCap(t *testing.T) {
	m := newManager(t, 1, time.Hour)
	a, b := Key{"o", "a"}, Key{"o", "b"}
	wsA, wsB := t.TempDir(), t.TempDir()
	mexec(t, m, a, wsA, "x = 1")
	if res := mexec(t, m, b, wsB, "y = 2"); res.KernelRestarted {
		t.Fatalf("b's first kernel says restarted")
	}
	if st, _ := m.Status(a); st.Alive {
		t.Fatalf("a's kernel was not evicted")
	}
	res := mexec(t, m, a, wsA, "'x' in globals()")
	if !res.KernelRestarted || res.RestartReason != "evicted" || plain(res) != "False" {
		t.Fatalf("restarted=%v reason %q value %q", res.KernelRestarted, res.RestartReason, plain(res))
	}
	var wg sync.WaitGroup
	wg.Add(1)
	started := make(chan struct{})
	go func() {
		defer wg.Done()
		_, _ = m.Exec(context.Background(), a, wsA, Cell{Code: "import time\ntime.sleep(2)", OnOutput: nil})
	}()
	go func() {
		for {
			if st, _ := m.Status(a); st.Busy {
				close(started)
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	<-started
	t0 := time.Now()
	_, err := m.Exec(context.Background(), b, wsB, Cell{Code: "1"})
	var busy *BusyError
	if !errors.As(err, &busy) || busy.RetryAfter <= 0 || time.Since(t0) > time.Second {
		t.Fatalf("with every kernel busy: %v after %v", err, time.Since(t0))
	}
	wg.Wait()
	if st := m.Stats(); st.Restarts["evicted"] != 1 {
		t.Fatalf("restarts %v", st.Restarts)
	}
}

// TestManagerIdleAndRestart checks the idle timeout and an asked-for
// restart, both reported by the next cell.
func TestManagerIdleAndRestart(t *testing.T) {
	m := newManager(t, 4, 300*time.Millisecond)
	a, ws := Key{"o", "a"}, t.TempDir()
	mexec(t, m, a, ws, "x = 1")
	deadline := time.Now().Add(10 * time.Second)
	for {
		if st, _ := m.Status(a); !st.Alive {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the idle kernel still runs")
		}
		time.Sleep(50 * time.Millisecond)
	}
	res := mexec(t, m, a, ws, "x = 2\n'ok'")
	if !res.KernelRestarted || res.RestartReason != "idle" {
		t.Fatalf("restarted=%v reason %q", res.KernelRestarted, res.RestartReason)
	}
	m = newManager(t, 4, time.Hour)
	mexec(t, m, a, ws, "x = 3")
	if !m.Restart(a) {
		t.Fatal("Restart found no kernel")
	}
	res = mexec(t, m, a, ws, "'x' in globals()")
	if !res.KernelRestarted || res.RestartReason != "restart" || plain(res) != "False" {
		t.Fatalf("restarted=%v reason %q value %q", res.KernelRestarted, res.RestartReason, plain(res))
	}
	m.Forget(a)
	if _, ok := m.Status(a); ok {
		t.Fatal("a forgotten key is still known")
	}
}
