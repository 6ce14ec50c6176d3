package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/codeagent/codeagent/lang"
	"github.com/codeagent/codeagent/llm"
	"github.com/codeagent/codeagent/llm/llmtest"
	"github.com/codeagent/codeagent/safety"
	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/workspace"
)

// fakeSandbox answers Run with fn, instantly; it is the stand-in for the
// program in tests of the loop itself.
type fakeSandbox struct {
	mu    sync.Mutex
	fn    func(ctx context.Context, spec sandbox.Spec, n int) sandbox.Result
	calls int
}

func (f *fakeSandbox) Run(ctx context.Context, spec sandbox.Spec) (sandbox.Result, error) {
	f.mu.Lock()
	f.calls++
	n := f.calls
	f.mu.Unlock()
	return f.fn(ctx, spec, n), nil
}

func (f *fakeSandbox) Close() error { return nil }

var (
	ckOnce sync.Once
	ck     *safety.Checker
)

func checker(t testing.TB) *safety.Checker {
	ckOnce.Do(func() {
		var err error
		if ck, err = safety.New(nil); err != nil {
			panic(err)
		}
	})
	return ck
}

func failWith(stderr string) sandbox.Result {
	return sandbox.Result{Status: sandbox.StatusError, ExitCode: 1, Stderr: []byte(stderr)}
}

func okWith(stdout string) sandbox.Result {
	return sandbox.Result{Status: sandbox.StatusOK, Stdout: []byte(stdout)}
}

func fence(code string) string { return "```python\n" + code + "```" }

func fakeAgent(t testing.TB, cfg Config, p llm.Provider, sb sandbox.Sandbox, obs Observer) (*Agent, *workspace.Workspace) {
	a, err := New(cfg, Deps{Provider: p, Sandbox: sb, Checker: checker(t), Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	ws, err := workspace.New(filepath.Join(t.TempDir(), "ws"))
	if err != nil {
		t.Fatal(err)
	}
	return a, ws
}

func reqText(r llm.Request) string {
	var b strings.Builder
	b.WriteString(r.System + "\n")
	for _, m := range r.Messages {
		b.WriteString(m.Content + "\n")
	}
	return b.String()
}

func TestNewValidates(t *testing.T) {
	sb := &fakeSandbox{}
	p := llmtest.NewFake()
	for _, c := range []struct {
		cfg  Config
		deps Deps
	}{
		{Config{}, Deps{Sandbox: sb, Checker: checker(t)}},
		{Config{}, Deps{Provider: p, Checker: checker(t)}},
		{Config{}, Deps{Provider: p, Sandbox: sb}},
		{Config{Lang: "cobol"}, Deps{Provider: p, Sandbox: sb, Checker: checker(t)}},
		{Config{Lang: "bash", Tests: true}, Deps{Provider: p, Sandbox: sb, Checker: checker(t)}},
		{Config{MaxIterations: -1}, Deps{Provider: p, Sandbox: sb, Checker: checker(t)}},
	} {
		if _, err := New(c.cfg, c.deps); !errors.Is(err, ErrConfig) {
			t.Errorf("New(%+v) = %v", c.cfg, err)
		}
	}
	a, _ := New(Config{Lang: "js"}, Deps{Provider: p, Sandbox: sb, Checker: checker(t)})
	if a.SolutionFile() != ".codeagent/solution.js" {
		t.Errorf("solution file %s", a.SolutionFile())
	}
}

// Without fresh starts the whole conversation is kept and the verifier's
// "missing" goes back with the output.
func TestIncompleteFeedbackKeepsHistory(t *testing.T) {
	p := llmtest.NewFake(fence("print('columns')\n"), `{"task_complete": false, "missing": "the total"}`,
		"no code here, sorry", fence("print('total 5')\n"), `{"task_complete": true, "missing": ""}`)
	sb := &fakeSandbox{fn: func(_ context.Context, spec sandbox.Spec, n int) sandbox.Result {
		if n == 1 {
			return okWith("columns\n")
		}
		return okWith("total 5\n")
	}}
	a, ws := fakeAgent(t, Config{Verify: true, FreshStartAfter: -1}, p, sb, nil)
	res, err := a.Run(context.Background(), Task{Prompt: "print the total", Workspace: ws})
	if err != nil || !res.Success || res.Attempts != 3 {
		t.Fatalf("err %v, res %+v", err, res)
	}
	wantClasses(t, res.History, ClassIncomplete, ClassNoCode, ClassNone)
	reqs := p.Requests()
	if !reqs[1].JSON || reqs[1].System == reqs[0].System {
		t.Error("the verification request is not a JSON request with its own system prompt")
	}
	mustContain(t, "repair", reqText(reqs[2]), "What is missing: the total", "columns", "It created no files")
	mustContain(t, "after no code", reqText(reqs[3]), "had no program", "no code here, sorry", "What is missing: the total")
	if len(reqs[3].Messages) != 5 {
		t.Errorf("history has %d messages, want 5", len(reqs[3].Messages))
	}
}

func TestFreshStartAndBudget(t *testing.T) {
	var answers []string
	for i := 0; i < 9; i++ {
		answers = append(answers, fence("print(undefined_name)\n"))
	}
	p := llmtest.NewFake(answers...)
	sb := &fakeSandbox{fn: func(context.Context, sandbox.Spec, int) sandbox.Result {
		return failWith("Traceback (most recent call last):\nNameError: name 'undefined_name' is not defined\n")
	}}
	var types []string
	a, ws := fakeAgent(t, Config{MaxIterations: 9}, p, sb, ObserverFunc(func(e Event) {
		if e.Type == EventAttemptStart && e.FreshStart {
			types = append(types, "fresh")
		}
	}))
	res, err := a.Run(context.Background(), Task{Prompt: "x", Workspace: ws})
	if err != nil || res.Success || res.Attempts != 9 || !strings.Contains(res.Message, "within 9 attempts") {
		t.Fatalf("err %v, res %+v", err, res)
	}
	var fresh []int
	for _, h := range res.History {
		if h.FreshStart {
			fresh = append(fresh, h.N)
		}
	}
	if len(fresh) != 2 || fresh[0] != 5 || fresh[1] != 9 || len(types) != 2 {
		t.Errorf("fresh starts at %v (events %v), want [5 9]", fresh, types)
	}
	reqs := p.Requests()
	if len(reqs[4].Messages) != 1 || len(reqs[5].Messages) != 3 {
		t.Errorf("fresh start messages %d, next %d", len(reqs[4].Messages), len(reqs[5].Messages))
	}
	mustContain(t, "fresh start", reqText(reqs[4]), "attempt 4 (name): NameError: name 'undefined_name' is not defined", "attempt 5 of 9")
}

// A hostile program plants links and a FIFO in the workspace, one in place
// of codeagent's own directory: the next attempt's write does not follow
// them and artifacts leave them out.
func TestHostileWorkspaceEntries(t *testing.T) {
	hostDir := t.TempDir()
	host := filepath.Join(hostDir, "solution.py")
	os.WriteFile(host, []byte("host"), 0o644)
	p := llmtest.NewFake(fence("print(1)\n"), fence("print(2)\n"))
	sb := &fakeSandbox{fn: func(_ context.Context, spec sandbox.Spec, n int) sandbox.Result {
		if n == 1 {
			os.RemoveAll(filepath.Join(spec.Workspace, lang.OwnDir))
			os.Symlink(hostDir, filepath.Join(spec.Workspace, lang.OwnDir))
			os.Symlink("/etc/passwd", filepath.Join(spec.Workspace, "leak.txt"))
			syscall.Mkfifo(filepath.Join(spec.Workspace, "pipe"), 0o644)
			return failWith("ValueError: x\n")
		}
		os.WriteFile(filepath.Join(spec.Workspace, "result.txt"), []byte("42"), 0o644)
		return okWith("2\n")
	}}
	a, ws := fakeAgent(t, Config{}, p, sb, nil)
	done := make(chan struct{})
	var res *Result
	var err error
	go func() { res, err = a.Run(context.Background(), Task{Prompt: "x", Workspace: ws}); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the run hung")
	}
	if err != nil || !res.Success {
		t.Fatalf("err %v, res %+v", err, res)
	}
	if b, _ := os.ReadFile(host); string(b) != "host" {
		t.Fatalf("host file overwritten: %q", b)
	}
	if len(res.Artifacts) != 1 || res.Artifacts[0].Path != "result.txt" {
		t.Errorf("artifacts = %+v", res.Artifacts)
	}
	if len(res.Skipped) != 2 {
		t.Errorf("skipped = %+v", res.Skipped)
	}
}

func TestCancellationStopsPromptly(t *testing.T) {
	p := llmtest.NewFake(fence("print(1)\n"))
	sb := &fakeSandbox{fn: func(ctx context.Context, _ sandbox.Spec, _ int) sandbox.Result {
		<-ctx.Done()
		return sandbox.Result{Status: sandbox.StatusSignaled, Signal: 9}
	}}
	a, ws := fakeAgent(t, Config{}, p, sb, nil)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	start := time.Now()
	_, err := a.Run(ctx, Task{Prompt: "x", Workspace: ws})
	if !errors.Is(err, context.Canceled) || time.Since(start) > 2*time.Second {
		t.Fatalf("err %v after %s", err, time.Since(start))
	}
	// A context ended before the model call stops at once.
	_, err = a.Run(ctx, Task{Prompt: "x", Workspace: ws})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v", err)
	}
}

func TestSecretsAreRedacted(t *testing.T) {
	const secret = "configured-secret-4711"
	p := llmtest.NewFake(fence("print('hi')\n"), fence("print('ok')\n"))
	sb := &fakeSandbox{fn: func(_ context.Context, _ sandbox.Spec, n int) sandbox.Result {
		if n == 1 {
			return failWith("leaked " + secret + " and sk-proj-ABCDEFGHIJKLMNOPQRSTUV\nKeyError: 'x'\n")
		}
		return okWith("token " + secret + "\n")
	}}
	var lines bytes.Buffer
	jl := NewJSONLines(&lines)
	a, ws := fakeAgent(t, Config{Secrets: []string{secret}}, p, sb, jl)
	res, err := a.Run(context.Background(), Task{Prompt: "task with " + secret, Workspace: ws})
	if err != nil || !res.Success {
		t.Fatalf("err %v, res %+v", err, res)
	}
	all, _ := json.Marshal(res)
	for _, text := range []string{reqText(p.Requests()[0]), reqText(p.Requests()[1]), string(all), lines.String()} {
		if strings.Contains(text, secret) || strings.Contains(text, "sk-proj-ABC") {
			t.Errorf("secret leaked: %s", text)
		}
	}
	mustContain(t, "feedback", reqText(p.Requests()[1]), "leaked [REDACTED] and [REDACTED]")
	if res.Output != "token [REDACTED]\n" {
		t.Errorf("output %q", res.Output)
	}
	// Every event line is one JSON object with a type.
	var types []string
	for _, l := range strings.Split(strings.TrimSpace(lines.String()), "\n") {
		var e Event
		if err := json.Unmarshal([]byte(l), &e); err != nil || e.Type == "" || e.Time.IsZero() {
			t.Fatalf("bad event line %q: %v", l, err)
		}
		types = append(types, string(e.Type))
	}
	want := "attempt_start generated checked executed attempt_start generated checked executed done"
	if strings.Join(types, " ") != want {
		t.Errorf("events %v", types)
	}
	if jl.Err() != nil {
		t.Error(jl.Err())
	}
}
