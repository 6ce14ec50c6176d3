package eval

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/codeagent/codeagent/agent"
	"github.com/codeagent/codeagent/workspace"
)

// BenchmarkHarnessOverhead runs the same HumanEval attempts (20 tasks,
// correct answers from a local fake model, the real checker and warm
// sandbox) through the harness, with a results file, and directly: agent.Run
// and one scoring of its code, as `codeagent run --test-file` would do
// without starting a process. The two alternate task by task, so that the
// load of a shared machine hits both alike; the harness is even started
// once per task, which overstates its cost. harness/direct is the ratio of
// their times (the target is under 1.05).
func BenchmarkHarnessOverhead(b *testing.B) {
	tasks, answers := humanEval(b, 20)
	m := newFakeModel(b, tasks, func(task *Task, _ chatRequest) string { return pyBlock(answers[task.ID]) })
	sb, ck := realParts(b)
	p := m.provider(b)
	a, err := agent.New(AgentConfig(agent.Config{}, ModeNone, 1), agent.Deps{Provider: p, Sandbox: sb, Checker: ck})
	if err != nil {
		b.Fatal(err)
	}
	scorer := &Scorer{Sandbox: sb}
	ctx := context.Background()
	direct := func(t *Task) time.Duration {
		t0 := time.Now()
		ws, err := workspace.New("")
		if err != nil {
			b.Fatal(err)
		}
		defer ws.Close()
		res, err := a.Run(ctx, agent.Task{Prompt: t.Prompt, Workspace: ws})
		if err != nil {
			b.Fatal(err)
		}
		if s, err := scorer.Score(ctx, t, res.Code); err != nil || !s.Passed {
			b.Fatalf("%s: %v %+v", t.ID, err, s)
		}
		return time.Since(t0)
	}
	res, err := OpenResults(filepath.Join(b.TempDir(), "results.jsonl"))
	if err != nil {
		b.Fatal(err)
	}
	defer res.Close()
	r, err := New(Config{Mode: ModeNone, Concurrency: 1, Model: "fake-model", Suite: "humaneval"},
		Deps{Provider: p, Sandbox: sb, Checker: ck, Results: res})
	if err != nil {
		b.Fatal(err)
	}
	harness := func(i int) time.Duration {
		t0 := time.Now()
		recs, err := r.Run(ctx, Jobs(tasks[i:i+1], 1))
		if err != nil || len(recs) != 1 || !recs[0].Passed {
			b.Fatalf("%v %v", recs, err)
		}
		return time.Since(t0)
	}
	for i := range tasks { // warm up the sandbox pool, the checker and the page cache
		direct(&tasks[i])
	}
	var td, th time.Duration
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		for i := range tasks {
			if (n+i)%2 == 0 {
				td += direct(&tasks[i])
				th += harness(i)
			} else {
				th += harness(i)
				td += direct(&tasks[i])
			}
		}
	}
	b.ReportMetric(float64(th)/float64(td), "harness/direct")
	b.ReportMetric(float64(td.Microseconds())/1000/float64(b.N*len(tasks)), "direct-ms/task")
	b.ReportMetric(float64(th.Microseconds())/1000/float64(b.N*len(tasks)), "harness-ms/task")
}
