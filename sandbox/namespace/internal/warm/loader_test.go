package warm

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
)

func TestSpec(t *testing.T) {
	s := Spec()
	if len(s.Command) != 2 || s.Command[0] != "python3" || s.Command[1] != loaderPath {
		t.Fatalf("command %q", s.Command)
	}
	if len(s.Files) != 1 || s.Files[0].Path != loaderPath || !bytes.Equal(s.Files[0].Data, loader) {
		t.Fatal("the loader is not the sandbox's one file")
	}
	if !bytes.Contains(loader, []byte("def _warm_up():")) || !strings.HasPrefix(loaderPath, "/code/") {
		t.Fatal("warm.py is not embedded below /code")
	}
	if s.Env["PYTHONUNBUFFERED"] != "1" || s.Env["MPLBACKEND"] != "Agg" {
		t.Fatalf("environment %v is not a Python program's", s.Env)
	}
	if l := Limits(); l.WallTime != startup || l.CPUTime != startup || l.Memory == 0 || l.Processes == 0 {
		t.Fatalf("warm-up limits %+v", l)
	}
}

func TestRequest(t *testing.T) {
	req, err := Request([]string{"/code/main.py", "a b"}, []string{"HOME=/tmp", "X=1=2", "PWD=/elsewhere"}, "/workspace")
	if err != nil {
		t.Fatal(err)
	}
	n, body, ok := bytes.Cut(req, []byte("\n"))
	if !ok {
		t.Fatalf("no length line: %q", req)
	}
	if l, err := strconv.Atoi(string(n)); err != nil || l != len(body) {
		t.Fatalf("length %q for %d bytes", n, len(body))
	}
	var got struct {
		Argv []string          `json:"argv"`
		Env  map[string]string `json:"env"`
		Cwd  string            `json:"cwd"`
	}
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	if strings.Join(got.Argv, "|") != "/code/main.py|a b" || got.Cwd != "/workspace" {
		t.Fatalf("argv %q cwd %q", got.Argv, got.Cwd)
	}
	if len(got.Env) != 3 || got.Env["HOME"] != "/tmp" || got.Env["X"] != "1=2" || got.Env["PWD"] != "/workspace" {
		t.Fatalf("env %v", got.Env)
	}
}

// writer records what is written and whether it was closed.
type writer struct {
	bytes.Buffer
	fail   bool
	closed bool
}

func (w *writer) Write(p []byte) (int, error) {
	if w.fail {
		return 0, errors.New("closed pipe")
	}
	return w.Buffer.Write(p)
}

func (w *writer) Close() error { w.closed = true; return nil }

func TestSend(t *testing.T) {
	w := &writer{}
	Send(w, []byte("2\n{}"), strings.NewReader("input"))
	if w.String() != "2\n{}input" || !w.closed {
		t.Fatalf("sent %q, closed %v", w.String(), w.closed)
	}
	w = &writer{}
	Send(w, []byte("2\n{}"), nil)
	if w.String() != "2\n{}" || !w.closed {
		t.Fatalf("sent %q, closed %v", w.String(), w.closed)
	}
	w = &writer{fail: true}
	Send(w, []byte("2\n{}"), strings.NewReader("input"))
	if !w.closed {
		t.Fatal("stdin not closed after a failed write")
	}
}

// ready runs AwaitReady on what a loader wrote on stdout and stderr
// before it exited (closed both).
func ready(t *testing.T, stdout, stderr string) error {
	t.Helper()
	pipe := func(s string) *os.File {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		// Within a pipe's buffer: written before AwaitReady reads.
		if _, err := io.WriteString(w, s); err != nil {
			t.Fatal(err)
		}
		w.Close()
		return r
	}
	return AwaitReady(pipe(stdout), pipe(stderr))
}

func TestAwaitReady(t *testing.T) {
	if err := ready(t, "ready\n", ""); err != nil {
		t.Fatalf("ready line: %v", err)
	}
	if err := ready(t, "failed ModuleNotFoundError('pandas')\n", ""); err == nil || !strings.Contains(err.Error(), "pandas") {
		t.Fatalf("failed warm-up: %v", err)
	}
	if err := ready(t, "ready\nprogram output", ""); err == nil {
		t.Fatal("output after the ready line was taken")
	}
	if err := ready(t, "", "Fatal Python error: init\n"); err == nil || !strings.Contains(err.Error(), "Fatal Python error") {
		t.Fatalf("exit before the ready line: %v", err)
	}
	if err := ready(t, strings.Repeat("x", 600), ""); err == nil || !strings.Contains(err.Error(), "no ready line") {
		t.Fatalf("endless line: %v", err)
	}
}
