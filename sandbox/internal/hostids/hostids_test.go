package hostids

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestAcquireDistinctAndReused(t *testing.T) {
	p, err := Open(t.TempDir(), 3_000_000_000, 8)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for range 8 {
		id, err := p.Acquire()
		if err != nil {
			t.Fatal(err)
		}
		if seen[id] || id < 3_000_000_000 || id >= 3_000_000_008 {
			t.Fatalf("id %d handed out twice or out of range (%v)", id, seen)
		}
		seen[id] = true
	}
	if _, err := p.Acquire(); err != ErrExhausted {
		t.Fatalf("the ninth Acquire of 8 ids: %v, want ErrExhausted", err)
	}
	p.Release(3_000_000_003)
	p.Release(3_000_000_003) // twice: must not hand it out twice
	if id, err := p.Acquire(); err != nil || id != 3_000_000_003 {
		t.Fatalf("Acquire after Release = %d, %v; want the released id", id, err)
	}
	if _, err := p.Acquire(); err != ErrExhausted {
		t.Fatalf("an id released twice was handed out twice: %v", err)
	}
	if p.InUse() != 8 {
		t.Fatalf("InUse = %d, want 8", p.InUse())
	}
}

// TestOtherProcessesSkipHeldIDs holds ids in a child process (this test
// binary, re-run) and checks that this process's pool skips them, and
// takes them once the child is gone.
func TestOtherProcessesSkipHeldIDs(t *testing.T) {
	if dir := os.Getenv("HOSTIDS_CHILD_DIR"); dir != "" {
		p, err := Open(dir, 3_000_000_000, 4)
		if err != nil {
			os.Exit(3)
		}
		var ids []string
		for range 3 {
			id, err := p.Acquire()
			if err != nil {
				os.Exit(4)
			}
			ids = append(ids, strconv.Itoa(id))
		}
		os.Stdout.WriteString(strings.Join(ids, " ") + "\n")
		var b [1]byte
		_, _ = os.Stdin.Read(b[:]) // hold them until told
		os.Exit(0)
	}
	dir := filepath.Join(t.TempDir(), "locks")
	cmd := exec.Command(os.Args[0], "-test.run", "^TestOtherProcessesSkipHeldIDs$")
	cmd.Env = append(os.Environ(), "HOSTIDS_CHILD_DIR="+dir)
	stdin, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 256)
	n, _ := out.Read(buf)
	theirs := strings.Fields(string(buf[:n]))
	if len(theirs) != 3 {
		t.Fatalf("the child printed %q", buf[:n])
	}
	p, err := Open(dir, 3_000_000_000, 4)
	if err != nil {
		t.Fatal(err)
	}
	id, err := p.Acquire()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range theirs {
		if s == strconv.Itoa(id) {
			t.Fatalf("got id %d, which another process holds", id)
		}
	}
	if _, err := p.Acquire(); err != ErrExhausted {
		t.Fatalf("with 3 of 4 ids held elsewhere, a second Acquire gave %v", err)
	}
	stdin.Close()
	_ = cmd.Wait()
	for range 3 {
		if _, err := p.Acquire(); err != nil {
			t.Fatalf("the ids of a process that ended are not free: %v", err)
		}
	}
}
