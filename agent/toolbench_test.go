package agent

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/codeagent/codeagent/kernel"
	"github.com/codeagent/codeagent/llm"
	"github.com/codeagent/codeagent/llm/llmtest"
	"github.com/codeagent/codeagent/llm/providers"
	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/workspace"
)

// instantKernel is a kernel.Interpreter that answers every cell at once:
// every fourth fails with a long traceback, the others print out.
type instantKernel struct {
	n      int
	out    []byte
	stderr []byte
}

func (k *instantKernel) Exec(_ context.Context, c kernel.Cell) (kernel.Result, error) {
	k.n++
	if k.n%4 == 0 {
		return kernel.Result{Result: sandbox.Result{Status: sandbox.StatusError, ExitCode: 1, Stderr: k.stderr},
			ExecutionCount: k.n, ErrorName: "KeyError", ErrorValue: "'quantity'"}, nil
	}
	return kernel.Result{Result: sandbox.Result{Status: sandbox.StatusOK, Stdout: k.out}, ExecutionCount: k.n}, nil
}
func (k *instantKernel) Restart(context.Context) error { return nil }
func (k *instantKernel) Close() error                  { return nil }

// BenchmarkToolStepOverhead measures tool mode's own work per step: the
// request (its growing conversation and tool definitions encoded by the
// real OpenAI client and decoded by the fake server in this process), the
// answer's tool calls parsed and validated, the static check of each
// cell, the result described, clipped and redacted, the events, and, once
// a run, the end: the program assembled, the verifier's request, and the
// replay (a fresh workspace with the inputs copied in, and the artifacts
// compared). The cells (instantKernel) and the replay (fakeSandbox) take
// no time. One op is a run of 20 steps; ns/step is the time per step.
// The memory variant uses an in-memory model instead of the server.
func BenchmarkToolStepOverhead(b *testing.B) {
	const nSteps = 20
	cell := strings.TrimPrefix(analysisCell, "")
	out := []byte(strings.Repeat("product,revenue\nWidget,42.00\n", 70)) // 2 KB a cell
	stderr := []byte("Traceback (most recent call last):\n  File \"<cell 4>\", line 5, in <module>\n" +
		strings.Repeat("    frame line of a long traceback\n", 200) + "KeyError: 'quantity'\n")
	var want strings.Builder
	for i := 1; i <= nSteps; i++ {
		if i%4 != 0 {
			want.Write(out)
		}
	}
	replay := &fakeSandbox{fn: func(context.Context, sandbox.Spec, int) sandbox.Result {
		return sandbox.Result{Status: sandbox.StatusOK, Stdout: []byte(want.String())}
	}}
	ws, err := workspace.New(filepath.Join(b.TempDir(), "ws"))
	if err != nil {
		b.Fatal(err)
	}
	os.WriteFile(filepath.Join(ws.Dir, "sales.csv"), []byte(salesCSV), 0o644)
	script := func() []llmtest.Reply {
		var rs []llmtest.Reply
		for i := 0; i < nSteps; i++ {
			rs = append(rs, llmtest.Call(pyCall(cell)))
		}
		return append(rs, llmtest.Say("Done."), llmtest.Say(`{"task_complete": true, "missing": ""}`))
	}
	cfg := Config{Mode: ModeTools, Verify: true, Secrets: []string{"sk-configured-key-0123456789"}}
	run := func(b *testing.B, provider func() llm.Provider) {
		b.ReportAllocs()
		var total time.Duration
		for i := 0; i < b.N; i++ {
			a, err := New(cfg, Deps{Provider: provider(), Sandbox: replay, Checker: checker(b), Observer: ObserverFunc(func(Event) {})})
			if err != nil {
				b.Fatal(err)
			}
			k := &instantKernel{out: out, stderr: stderr}
			start := time.Now()
			res, err := a.Run(context.Background(), Task{Prompt: "Analyze sales.csv: top 5 products by revenue", Workspace: ws,
				NewKernel: func(kernel.Options) kernel.Interpreter { return k }})
			total += time.Since(start)
			if err != nil || !res.Success || len(steps(res)) != nSteps {
				b.Fatalf("err %v, success %v after %d steps (%s)", err, res.Success, len(steps(res)), res.Message)
			}
		}
		b.ReportMetric(float64(total.Nanoseconds())/float64(b.N*nSteps), "ns/step")
	}
	b.Run("http", func(b *testing.B) {
		srv := llmtest.NewOpenAIServer(b)
		p, err := providers.New(llmtest.Config(llm.ProviderOpenAI, srv.BaseURL), nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		run(b, func() llm.Provider { srv.Push(script()...); return p })
	})
	b.Run("memory", func(b *testing.B) {
		run(b, func() llm.Provider {
			f := llmtest.NewFake()
			for _, r := range script() {
				f.Push(llmtest.FakeReply{Response: llm.Response{Text: r.Text, ToolCalls: r.ToolCalls, FinishReason: llm.FinishStop}})
			}
			return f
		})
	})
}
