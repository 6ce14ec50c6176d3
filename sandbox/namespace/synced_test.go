//go:build linux && (amd64 || arm64)

package namespace

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/codeagent/codeagent/sandbox"
)

// liveProgram is a program with a live workspace (a kernel's kind) that
// runs each line of Python it reads and answers "ok" or the error, so that
// a test can act on both sides between its steps.
type liveProgram struct {
	t      *testing.T
	stdin  *io.PipeWriter
	lines  *bufio.Scanner
	sync   sandbox.Syncer
	done   chan sandbox.Result
	result sandbox.Result
	ended  sync.Once
}

func startLive(t *testing.T, b *Backend, ws string) *liveProgram {
	t.Helper()
	pr, pw := io.Pipe()
	or, ow := io.Pipe()
	started := make(chan sandbox.Running, 1)
	p := &liveProgram{t: t, stdin: pw, lines: bufio.NewScanner(or), done: make(chan sandbox.Result, 1)}
	code := "import os, sys\nfor line in sys.stdin:\n    try:\n        exec(line)\n        print('ok', flush=True)\n    except Exception as e:\n        print('error', repr(e), flush=True)\n"
	go func() {
		res, err := b.Run(context.Background(), sandbox.Spec{Command: []string{"python3", "-c", code}, Workspace: ws,
			LiveWorkspace: true, Stdin: pr, Stdout: ow, Stream: true,
			Limits:  sandbox.Limits{WallTime: 2 * time.Minute},
			Started: func(r sandbox.Running) { started <- r }})
		if err != nil {
			res.Message = err.Error()
		}
		ow.Close()
		p.done <- res
	}()
	select {
	case r := <-started:
		s, ok := r.(sandbox.Syncer)
		if !ok {
			t.Skip("this backend binds a live workspace itself (no copy to sync)")
		}
		p.sync = s
	case res := <-p.done:
		t.Fatalf("the program ended at once: %s %s", res.Status, res.Message)
	}
	t.Cleanup(p.end)
	return p
}

// do runs one line of Python in the program.
func (p *liveProgram) do(line string) {
	p.t.Helper()
	if _, err := io.WriteString(p.stdin, line+"\n"); err != nil {
		p.t.Fatal(err)
	}
	if !p.lines.Scan() {
		p.t.Fatalf("%s: the program ended", line)
	}
	if got := p.lines.Text(); got != "ok" {
		p.t.Fatalf("%s: %s", line, got)
	}
}

func (p *liveProgram) syncNow() {
	p.t.Helper()
	if err := p.sync.Sync(context.Background()); err != nil {
		p.t.Fatalf("sync: %v", err)
	}
}

// end lets the program end and waits for its last sync.
func (p *liveProgram) end() {
	p.ended.Do(func() {
		p.stdin.Close()
		p.result = <-p.done
	})
}

func readOr(path, missing string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return missing
	}
	return string(b)
}

// TestSyncedWorkspace: a live program (a kernel) works on a copy of its
// workspace; Sync carries each side's changes to the other, a change beats
// a removal, and the program's descriptors stay good across syncs.
func TestSyncedWorkspace(t *testing.T) {
	b := overlayBackend(t)
	ws := t.TempDir()
	files("in.txt", "gone.txt", "dir/a.txt", "both.txt", "kept/x.txt")(t, ws)
	p := startLive(t, b, ws)

	// The program's writes reach the workspace at a sync, not before.
	p.do(`open('out.txt', 'w').write('program')`)
	p.do(`log = open('log.txt', 'a'); log.write('one\n'); log.flush()`)
	if got := readOr(filepath.Join(ws, "out.txt"), "missing"); got != "missing" {
		t.Errorf("out.txt reached the workspace before a sync: %q", got)
	}
	p.syncNow()
	if got := readOr(filepath.Join(ws, "out.txt"), "missing"); got != "program" {
		t.Errorf("after a sync out.txt is %q", got)
	}
	var st syscall.Stat_t
	if err := syscall.Lstat(filepath.Join(ws, "out.txt"), &st); err != nil || st.Uid != 0 || st.Mode&0o7777 != 0o644 {
		t.Errorf("out.txt: %v uid %d mode %o; want the workspace's owner (root) and 0644", err, st.Uid, st.Mode&0o7777)
	}

	// Others' changes reach the program at a sync.
	if err := os.WriteFile(filepath.Join(ws, "in.txt"), []byte("host v2"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "upload.csv"), []byte("a,b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(ws, "gone.txt")); err != nil {
		t.Fatal(err)
	}
	p.syncNow()
	p.do(`assert open('in.txt').read() == 'host v2', open('in.txt').read()`)
	p.do(`assert open('upload.csv').read() == 'a,b\n'`)
	p.do(`assert not os.path.exists('gone.txt')`)

	// A descriptor kept across syncs still writes to the file the
	// workspace gets.
	p.do(`log.write('two\n'); log.flush()`)
	p.syncNow()
	if got := readOr(filepath.Join(ws, "log.txt"), ""); got != "one\ntwo\n" {
		t.Errorf("log.txt written through a descriptor kept across syncs: %q", got)
	}

	// Both sides change one file: the later change wins. The program
	// removes a directory in which the host has just made a file: the
	// host's file stays, on both sides.
	p.do(`open('both.txt', 'w').write('program')`)
	time.Sleep(20 * time.Millisecond)
	if err := os.WriteFile(filepath.Join(ws, "both.txt"), []byte("host, later"), 0o644); err != nil {
		t.Fatal(err)
	}
	p.do(`import shutil; shutil.rmtree('kept')`)
	if err := os.WriteFile(filepath.Join(ws, "kept", "new.txt"), []byte("host"), 0o644); err != nil {
		t.Fatal(err)
	}
	p.syncNow()
	if got := readOr(filepath.Join(ws, "both.txt"), ""); got != "host, later" {
		t.Errorf("both.txt: %q, want the later change (the host's)", got)
	}
	p.do(`assert open('both.txt').read() == 'host, later', open('both.txt').read()`)
	if got := readOr(filepath.Join(ws, "kept", "new.txt"), "missing"); got != "host" {
		t.Errorf("the host's new file in a directory the program removed: %q", got)
	}
	if got := readOr(filepath.Join(ws, "kept", "x.txt"), "missing"); got != "missing" {
		t.Errorf("the program's removal of kept/x.txt did not reach the workspace: %q", got)
	}
	p.do(`assert open('kept/new.txt').read() == 'host'`)

	// A chmod 0777 of the workspace and a new directory does not come
	// back, and the end of the program carries its last changes.
	p.do(`os.chmod('.', 0o777); os.mkdir('open'); os.chmod('open', 0o777); open('last.txt', 'w').write('last')`)
	p.end()
	if p.result.Status != sandbox.StatusOK {
		t.Fatalf("the program: %s %s %s", p.result.Status, p.result.Message, p.result.Stderr)
	}
	if got := readOr(filepath.Join(ws, "last.txt"), "missing"); got != "last" {
		t.Errorf("the program's last change did not reach the workspace at its end: %q", got)
	}
	for _, rel := range []string{".", "open"} {
		fi, err := os.Stat(filepath.Join(ws, rel))
		if err != nil || fi.Mode().Perm()&0o022 != 0 {
			t.Errorf("%s: %v %v; group and others may not write", rel, fi.Mode(), err)
		}
	}
}

// TestSyncedWorkspaceDiskLimit: what others add to the workspace while a
// live program runs does not count against the program's disk limit, and
// what the program adds does, by construction (an unlinked file held open
// included).
func TestSyncedWorkspaceDiskLimit(t *testing.T) {
	b := overlayBackend(t)
	ws := t.TempDir()
	pr, pw := io.Pipe()
	started := make(chan sandbox.Running, 1)
	done := make(chan sandbox.Result, 1)
	code := `import os, sys
sys.stdin.readline()
assert os.path.getsize('upload.bin') == 30 << 20
fds, total = [], 0
try:
    for i in range(40):
        fd = os.open(f'u{i}', os.O_WRONLY | os.O_CREAT, 0o644)
        os.unlink(f'u{i}')
        fds.append(fd)
        total += os.write(fd, b'\1' * (1 << 20))
except OSError as e:
    pass
print(total)
`
	go func() {
		res, _ := b.Run(context.Background(), sandbox.Spec{Command: []string{"python3", "-c", code}, Workspace: ws,
			LiveWorkspace: true, Stdin: pr, Limits: sandbox.Limits{Disk: 10 << 20, FileSize: 2 << 20, WallTime: time.Minute},
			Started: func(r sandbox.Running) { started <- r }})
		done <- res
	}()
	s, ok := (<-started).(sandbox.Syncer)
	if !ok {
		t.Skip("no copy to sync")
	}
	// 30 MiB from the host, three times the program's limit.
	if err := os.WriteFile(filepath.Join(ws, "upload.bin"), make([]byte, 30<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(context.Background()); err != nil {
		t.Fatalf("sync: %v", err)
	}
	fmt.Fprintln(pw, "go")
	pw.Close()
	res := <-done
	var total int64
	fmt.Sscan(strings.TrimSpace(string(res.Stdout)), &total)
	t.Logf("%s; write(2) accepted %d MiB into unlinked files", res.Status, total>>20)
	if res.Status == sandbox.StatusError {
		t.Fatalf("the program did not see the upload: %s", res.Stderr)
	}
	if bound := int64(10<<20 + 2<<20); total > bound {
		t.Errorf("the program held %d MiB in unlinked files, more than its disk limit and a file size", total>>20)
	}
}
