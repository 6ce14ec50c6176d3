package agent

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/codeagent/codeagent/llm/llmtest"
	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/workspace"
)

// BenchmarkIterationOverhead measures the loop's own work per iteration:
// prompts, extraction, the static check, writing the program, output
// clipping and redaction, classification, verification parsing, events and
// the artifact snapshots. The model (an in-memory llmtest.Fake) and the
// program (a sandbox that answers at once) take no time. One op is a run
// of 5 iterations (4 failures with a traceback and a 30 KB output, then a
// success judged by the verifier); ns/iter is the time per iteration.
func BenchmarkIterationOverhead(b *testing.B) {
	const iters = 5
	code := strings.Repeat(strings.TrimPrefix(analysis, ""), 1) // a realistic 24-line pandas program
	stderr := "Traceback (most recent call last):\n  File \"/workspace/solution.py\", line 9, in main\n" +
		strings.Repeat("    frame line of a long traceback\n", 200) + "KeyError: 'quantity'\n"
	stdout := strings.Repeat("date,product,units,unit_price,revenue\n", 800)
	sb := &fakeSandbox{fn: func(_ context.Context, spec sandbox.Spec, n int) sandbox.Result {
		if n%iters == 0 {
			return sandbox.Result{Status: sandbox.StatusOK, Stdout: []byte("Top 5 products by revenue:\nWidget: 42.00\n")}
		}
		return sandbox.Result{Status: sandbox.StatusError, ExitCode: 1, Stdout: []byte(stdout), Stderr: []byte(stderr)}
	}}
	ws, err := workspace.New(filepath.Join(b.TempDir(), "ws"))
	if err != nil {
		b.Fatal(err)
	}
	os.WriteFile(filepath.Join(ws.Dir, "sales.csv"), []byte(salesCSV), 0o644)
	answers := make([]string, 0, iters+1)
	for i := 0; i < iters; i++ {
		answers = append(answers, "Here you go:\n\n"+fence(code))
	}
	answers = append(answers, `{"task_complete": true, "missing": ""}`)
	cfg := Config{MaxIterations: iters, Verify: true, Secrets: []string{"sk-configured-key-0123456789"}}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	var total time.Duration
	for i := 0; i < b.N; i++ {
		a, err := New(cfg, Deps{Provider: llmtest.NewFake(answers...), Sandbox: sb, Checker: checker(b), Observer: ObserverFunc(func(Event) {})})
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		res, err := a.Run(ctx, Task{Prompt: "Analyze sales.csv: top 5 products by revenue", Workspace: ws})
		total += time.Since(start)
		if err != nil || !res.Success || res.Attempts != iters {
			b.Fatalf("err %v, success %v after %d", err, res.Success, res.Attempts)
		}
	}
	b.ReportMetric(float64(total.Nanoseconds())/float64(b.N*iters), "ns/iter")
}
