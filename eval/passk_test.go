package eval

import (
	"context"
	"math"
	"math/big"
	"strings"
	"sync"
	"testing"
)

// exactPassAtK is 1 - C(n-c, k)/C(n, k) in exact arithmetic.
func exactPassAtK(n, c, k int) float64 {
	if n-c < k {
		return 1
	}
	num := new(big.Int).Binomial(int64(n-c), int64(k))
	den := new(big.Int).Binomial(int64(n), int64(k))
	r, _ := new(big.Rat).Sub(big.NewRat(1, 1), new(big.Rat).SetFrac(num, den)).Float64()
	return r
}

func TestPassAtKEstimator(t *testing.T) {
	for _, c := range []struct{ n, c, k int }{
		{1, 0, 1}, {1, 1, 1}, {10, 3, 1}, {10, 3, 5}, {10, 0, 5}, {10, 6, 5}, {200, 3, 100}, {200, 1, 1}, {1000, 7, 100}, {1000, 999, 100},
	} {
		got, want := PassAtK(c.n, c.c, c.k), exactPassAtK(c.n, c.c, c.k)
		if math.Abs(got-want) > 1e-12 || math.IsNaN(got) {
			t.Errorf("pass@%d with n=%d c=%d: %v, want %v", c.k, c.n, c.c, got, want)
		}
	}
	if got := PassAtK(10, 3, 1); math.Abs(got-0.3) > 1e-15 {
		t.Errorf("pass@1 is not c/n: %v", got)
	}
}

// pass@k averages the per-task estimates over tasks; ks that some task
// has too few samples for are not estimated; the per-attempt figures are
// over samples and keep their own name.
func TestSummarizeSamples(t *testing.T) {
	var recs []Record
	for s := 0; s < 10; s++ {
		a := rec("a", "m", ModeNone, 1, 0, 1, s < 3)
		b := rec("b", "m", ModeNone, 1, 0, 1, false)
		a.Sample, b.Sample = s, s
		if a.Passed {
			a.FirstPassAttempt = 1
		}
		a.ScoreSettings, b.ScoreSettings = "humaneval harness, 3s", "humaneval harness, 3s"
		recs = append(recs, a, b)
	}
	s := Summarize("s", Key{"m", ModeNone, 1}, 2, recs, 1, 5, 100)
	want5 := (exactPassAtK(10, 3, 5) + 0) / 2
	if s.Scored != 2 || s.Samples != 20 || s.MinSamples != 10 || len(s.PassK) != 2 || math.Abs(s.PassK[0].Rate-0.15) > 1e-12 ||
		math.Abs(s.PassK[1].Rate-want5) > 1e-12 || len(s.NotEstimated) != 1 || s.NotEstimated[0] != 100 ||
		s.PassAt[0].Passed != 3 || s.Final.Rate != 0.15 || len(s.Failed) != 1 || s.Failed[0] != "b" {
		t.Fatalf("summary %+v", s)
	}
	var md strings.Builder
	s.WriteMarkdown(&md)
	for _, want := range []string{"| tasks | samples | pass@attempt 1 |", "| 2 | 20 | 15.0% (3) |", "pass@1 15.0%, pass@5 45.8%",
		"not estimated for k = 100", "scoring settings: humaneval harness, 3s"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, md.String())
		}
	}
	if d := DefaultKs(4); len(d) != 1 || DefaultKs(5)[1] != 5 {
		t.Errorf("default ks %v %v", d, DefaultKs(5))
	}
}

// Plan asks for the samples a task lacks; records of several samples are
// kept apart.
func TestPlanSamples(t *testing.T) {
	tasks := []Task{{ID: "a"}, {ID: "b"}}
	key := Key{"m", ModeNone, 1}
	r0, r1 := rec("a", "m", ModeNone, 1, 1, 1, true), rec("a", "m", ModeNone, 1, 0, 1, false)
	r1.Sample = 1
	_, todo, err := Plan(tasks, []Record{r0, r1}, key, Selection{Samples: 3})
	if err != nil || len(todo) != 4 || todo[0].Task.ID != "a" || todo[0].Sample != 2 || todo[1].Task.ID != "b" || todo[3].Sample != 2 {
		t.Fatalf("todo %+v %v", todo, err)
	}
	if l := Latest([]Record{r0, r1, r0}, key); len(l) != 2 {
		t.Errorf("latest merged samples: %+v", l)
	}
	if in := InScope([]Record{r1, r0}, tasks, 1); len(in) != 1 || in[0].Sample != 0 {
		t.Errorf("in scope: %+v", in)
	}
}

// --samples N: each sample is a full agent run of its own, recorded apart.
func TestRunnerSamples(t *testing.T) {
	tasks, answers := humanEval(t, 2)
	var mu sync.Mutex
	n := map[string]int{}
	m := newFakeModel(t, tasks, func(task *Task, _ chatRequest) string {
		mu.Lock()
		defer mu.Unlock()
		n[task.ID]++
		if n[task.ID]%2 == 0 {
			return pyBlock(wrongCode(task))
		}
		return pyBlock(answers[task.ID])
	})
	r := newRunner(t, m, Config{Mode: ModeNone, Concurrency: 2}, nil, nil)
	recs, err := r.Run(context.Background(), Jobs(tasks, 4))
	if err != nil {
		t.Fatal(err)
	}
	s := Summarize("humaneval", r.Key(), len(tasks), InScope(Latest(recs, r.Key()), tasks, 4), 1, 2)
	if len(recs) != 8 || m.callsOf(tasks[0].ID) != 4 || s.MinSamples != 4 || math.Abs(s.PassK[0].Rate-0.5) > 1e-12 ||
		math.Abs(s.PassK[1].Rate-exactPassAtK(4, 2, 2)) > 1e-12 {
		t.Fatalf("%d records, %d calls, summary %+v", len(recs), m.callsOf(tasks[0].ID), s)
	}
}
