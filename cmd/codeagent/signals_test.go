package main

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/codeagent/codeagent/llm/llmtest"
)

// runInterrupted runs the CLI in-process and delivers sig, as the root
// context does, after the given delay.
func runInterrupted(t *testing.T, sig syscall.Signal, after time.Duration, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	time.AfterFunc(after, func() { cancel(interrupt{sig}) })
	if len(args) > 0 && args[0] == "run" {
		args = append([]string{"run", "--no-folder"}, args[1:]...) // as runCLI
	}
	var out, errb bytes.Buffer
	code := run(ctx, args, stdio{in: strings.NewReader(""), out: &out, err: &errb})
	return code, out.String(), errb.String()
}

// A command stopped by Ctrl-C exits 130 and says so in one line; SIGTERM
// exits 143.
func TestInterruptedCommandsExit130WithOneLine(t *testing.T) {
	slow := llmtest.Reply{Delay: 30 * time.Second, Text: "late"}
	_, flags := modelServer(t, slow, slow, slow, slow)
	results := filepath.Join(t.TempDir(), "r.jsonl")
	hostile := writeCheckFile(t, t.TempDir(), "q.js", strings.Repeat("'", 400000))
	for _, c := range []struct {
		name string
		sig  syscall.Signal
		args []string
		code int
		line string
	}{
		{"run", syscall.SIGINT, append(append([]string{"run"}, flags...), "--progress", "do it"), 130, "codeagent: interrupted\n"},
		{"run SIGTERM", syscall.SIGTERM, append(append([]string{"run"}, flags...), "do it"), 143, "codeagent: terminated\n"},
		{"exec", syscall.SIGINT, []string{"exec", writeProgram(t, "sleep.py", "import time\ntime.sleep(30)\n")}, 130, "codeagent: interrupted\n"},
		{"eval", syscall.SIGINT, append(append([]string{"eval"}, flags...), "--tasks", evalTasksFile(t), "--concurrency", "1", "--results", results), 130,
			"codeagent: interrupted after 0 of 3 sample(s); run the same command again to resume from " + results + "\n"},
		{"check", syscall.SIGINT, []string{"check", hostile}, 130, "codeagent: interrupted\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			began := time.Now()
			code, _, stderr := runInterrupted(t, c.sig, 500*time.Millisecond, c.args...)
			if d := time.Since(began); d > 20*time.Second {
				t.Errorf("took %v after the signal", d)
			}
			// --progress shows the attempt that was under way; after it,
			// only the one line.
			if i := strings.LastIndex(stderr, "· generating\n"); i >= 0 {
				stderr = stderr[i+len("· generating\n"):]
			}
			if code != c.code || stderr != c.line {
				t.Errorf("exit %d, stderr %q; want %d, %q", code, stderr, c.code, c.line)
			}
		})
	}
}

// The real binary: Ctrl-C (SIGINT) reaches the root context.
func TestSignalStopsTheBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	prog := writeProgram(t, "sleep.py", "import time\ntime.sleep(30)\n")
	cmd := exec.Command(mcpBinary(t), "exec", prog)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	cmd.Process.Signal(syscall.SIGINT)
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatal("still running 20s after SIGINT")
	}
	if code := cmd.ProcessState.ExitCode(); code != 130 || errb.String() != "codeagent: interrupted\n" {
		t.Errorf("exit %d, stderr %q", code, errb.String())
	}
}
