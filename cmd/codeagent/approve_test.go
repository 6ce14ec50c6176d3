package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/codeagent/codeagent/llm/llmtest"
)

// ptySession is the binary running on a pseudo-terminal (its standard
// input, output and error), driven like a person at it.
type ptySession struct {
	t      *testing.T
	master *os.File
	cmd    *exec.Cmd
	mu     sync.Mutex
	out    bytes.Buffer
	seen   int // how far expect has read
	done   chan struct{}
}

func startOnPTY(t *testing.T, env []string, args ...string) *ptySession {
	t.Helper()
	m, s := openPTY(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, mcpBinary(t), args...)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = s, s, s
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	p := &ptySession{t: t, master: m, cmd: cmd, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		buf := make([]byte, 4096)
		for {
			n, err := m.Read(buf)
			p.mu.Lock()
			p.out.Write(buf[:n])
			p.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() { m.Close() })
	return p
}

// expect waits until the terminal shows want after what was expected
// before, and moves past it.
func (p *ptySession) expect(want string) {
	p.t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		p.mu.Lock()
		rest := p.out.String()[p.seen:]
		if i := strings.Index(rest, want); i >= 0 {
			p.seen += i + len(want)
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
		select {
		case <-p.done:
			p.t.Fatalf("the terminal closed without %q; it showed:\n%s", want, p.all())
		case <-time.After(20 * time.Millisecond):
		}
	}
	p.t.Fatalf("the terminal did not show %q; it showed:\n%s", want, p.all())
}

func (p *ptySession) send(line string) {
	p.t.Helper()
	if _, err := io.WriteString(p.master, line+"\n"); err != nil {
		p.t.Fatal(err)
	}
}

func (p *ptySession) all() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// wait returns the exit status once the binary ends.
func (p *ptySession) wait() int {
	p.t.Helper()
	err := p.cmd.Wait()
	if p.cmd.ProcessState == nil {
		p.t.Fatal(err)
	}
	<-p.done
	return p.cmd.ProcessState.ExitCode()
}

const approvePrompt = "run it? [y]es, [n]o, [e]dit, [a]ll the rest, [q]uit: "

// A person at the terminal rejects the first program with a reason, edits
// the second in $EDITOR and approves the rest: the reason reaches the
// model, the edit is what runs, and nothing more is asked.
func TestRunApproveAtATerminal(t *testing.T) {
	srv, flags := modelServer(t,
		pyAnswer("print('hello')\n"),
		pyAnswer("print('HELLO')\n"),
		pyAnswer("print('THIRD')\n"))
	editor := filepath.Join(t.TempDir(), "editor.sh")
	if err := os.WriteFile(editor, []byte("#!/bin/sh\nprintf 'print(\"EDITED\")\\nraise SystemExit(4)\\n' > \"$1\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	dataDir := t.TempDir()
	p := startOnPTY(t, []string{"EDITOR=" + editor, "VISUAL="},
		append(append([]string{"run"}, flags...), "--approve", "--no-verify", "--no-folder", "--data-dir", dataDir, "say hello")...)
	p.expect("print('hello')")
	p.expect(approvePrompt)
	p.send("n")
	p.expect("why? (told to the model): ")
	p.send("shout it in capitals")
	p.expect("print('HELLO')")
	p.expect(approvePrompt)
	p.send("e")
	p.expect("edited; this runs if you approve it:")
	p.expect(approvePrompt)
	p.send("a")
	if code := p.wait(); code != 0 {
		t.Fatalf("exit %d:\n%s", code, p.all())
	}
	if n := strings.Count(p.all(), approvePrompt); n != 3 {
		t.Errorf("asked %d times, want 3 (two programs, one of them edited, then all approved):\n%s", n, p.all())
	}
	reqs := srv.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d model requests, want 3", len(reqs))
	}
	if got := reqs[1].Text(); !strings.Contains(got, "shout it in capitals") {
		t.Errorf("the reason did not reach the model:\n%s", got)
	}
	if got := reqs[2].Text(); !strings.Contains(got, "EDITED") || !strings.Contains(got, "status 4") {
		t.Errorf("the model did not see the edited program's run:\n%s", got)
	}
	// The audit log has each decision, who made it, the reason and the
	// edit's hash.
	var got []string
	for _, r := range auditRecords(t, dataDir) {
		if r.Kind == "approval" {
			edited := r.Data["edited_sha256"] != nil && r.Data["edited_sha256"] != ""
			got = append(got, fmt.Sprintf("%v by %v (%v) edited=%v rest=%v", r.Data["decision"], r.Data["by"], r.Data["reason"], edited, r.Data["rest"]))
		}
	}
	want := "reject by cli (shout it in capitals) edited=false rest=false|approve by cli () edited=true rest=true"
	if strings.Join(got, "|") != want {
		t.Errorf("audited approvals:\n%s\nwant\n%s", strings.Join(got, "|"), want)
	}
}

// q at the prompt stops the run before the program runs.
func TestRunApproveQuitRunsNothing(t *testing.T) {
	_, flags := modelServer(t, pyAnswer("open('made.txt', 'w').write('x')\n"))
	out := t.TempDir()
	p := startOnPTY(t, nil, append(append([]string{"run"}, flags...), "--approve", "--no-verify", "--no-folder", "--out", out, "--data-dir", t.TempDir(), "make a file")...)
	p.expect(approvePrompt)
	p.send("q")
	if code := p.wait(); code != 1 || !strings.Contains(p.all(), "stopped by cli") {
		t.Fatalf("exit %d:\n%s", code, p.all())
	}
	if _, err := os.Stat(filepath.Join(out, "made.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the stopped program ran: %v", err)
	}
}

func TestRunApproveNeedsATerminal(t *testing.T) {
	srv, flags := modelServer(t)
	code, _, stderr := runBinary(t, "", nil, append(append([]string{"run"}, flags...), "--approve", "say hello")...)
	if code != 2 || !strings.Contains(stderr, "terminal") {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if n := len(srv.Requests()); n != 0 {
		t.Errorf("the model was asked %d times", n)
	}
	if code, _, stderr := runBinary(t, "", nil, append(append([]string{"run"}, flags...), "--approve=sometimes", "x")...); code != 2 || !strings.Contains(stderr, "on-finding") {
		t.Errorf("--approve=sometimes: exit %d: %s", code, stderr)
	}
}

// A program asking for a host the user did not allow is refused without
// --approve, and runs reaching it once a person approves: for that run.
func TestRunAHostOnlyAPersonGrants(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "from-the-granted-host") }))
	t.Cleanup(func() { ln.Close() })
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	prog := "# network: fetch.test:" + port + "\nimport urllib.request\nprint(urllib.request.urlopen('http://fetch.test:" + port + "/').read().decode())\n"
	netFlags := []string{"--allow-host", "other.test", "--egress-resolve", "fetch.test=" + ln.Addr().String()}

	srv, flags := modelServer(t, pyAnswer(prog))
	code, _, stderr := runBinary(t, "", nil, append(append(append([]string{"run"}, flags...), "--max-iterations", "1", "--no-verify"), append(netFlags, "fetch it")...)...)
	if code != 1 || !strings.Contains(stderr, "did not allow") {
		t.Fatalf("without --approve: exit %d: %s", code, stderr)
	}
	_ = srv

	_, flags = modelServer(t, pyAnswer(prog))
	p := startOnPTY(t, nil, append(append(append([]string{"run"}, flags...), "--approve=on-finding", "--no-verify", "--no-folder", "--data-dir", t.TempDir()), append(netFlags, "fetch it")...)...)
	p.expect("asks to reach: fetch.test:" + port)
	p.expect(approvePrompt)
	p.send("y")
	if code := p.wait(); code != 0 || !strings.Contains(p.all(), "from-the-granted-host") {
		t.Fatalf("with --approve: exit %d:\n%s", code, p.all())
	}
}

// --review-model asks a second model, at its own endpoint with its own
// key, before each program runs; its rejection goes back to the model and
// the rejected program never runs.
func TestRunReviewModelRejectionReachesTheModel(t *testing.T) {
	srv, flags := modelServer(t, pyAnswer("open('evil.txt', 'w').write('x')\nprint('hi')\n"), pyAnswer("print('hi')\n"))
	reviewer := llmtest.NewOpenAIServer(t,
		llmtest.Say(`{"approve": false, "concerns": ["it writes evil.txt, which the task does not ask for"]}`),
		llmtest.Say(`{"approve": true, "concerns": []}`))
	out := t.TempDir()
	code, stdout, stderr := runBinary(t, "", []string{"CODEAGENT_REVIEW_API_KEY=review-key"}, append(append([]string{"run"}, flags...),
		"--review-model", "judge", "--review-base-url", reviewer.BaseURL, "--no-verify", "--no-folder", "--out", out, "--json", "say hi")...)
	if code != 0 {
		t.Fatalf("exit %d: %s %s", code, stdout, stderr)
	}
	if got := srv.Requests()[1].Text(); !strings.Contains(got, "it writes evil.txt") {
		t.Errorf("the concern did not reach the model:\n%s", got)
	}
	rr := reviewer.Requests()
	if len(rr) != 2 || rr[0].Model() != "judge" || rr[0].Header.Get("Authorization") != "Bearer review-key" {
		t.Errorf("reviewer requests: %d, model %q", len(rr), rr[0].Model())
	}
	if _, err := os.Stat(filepath.Join(out, "evil.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the rejected program ran: %v", err)
	}
}
