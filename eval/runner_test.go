package eval

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/codeagent/codeagent/llm"
)

func newRunner(t testing.TB, m *fakeModel, cfg Config, res *ResultsFile, onRecord func(Record)) *Runner {
	t.Helper()
	sb, ck := realParts(t)
	cfg.Model, cfg.Suite = "fake-model", "humaneval"
	r, err := New(cfg, Deps{Provider: m.provider(t), Sandbox: sb, Checker: ck, Results: res, OnRecord: onRecord})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func summarize(r *Runner, tasks []Task, recs []Record) Summary {
	return Summarize("humaneval", r.Key(), len(tasks), InScope(Latest(recs, r.Key()), tasks, 1))
}

// A model that answers every HumanEval task with its canonical solution
// scores 100% at the first attempt. The full run (164 tasks at concurrency
// 2) also measures the "well under a minute" target; -short runs 20.
func TestHumanEvalCorrectAnswersScoreAll(t *testing.T) {
	n := 0
	if testing.Short() {
		n = 20
	}
	tasks, answers := humanEval(t, n)
	m := newFakeModel(t, tasks, func(task *Task, _ chatRequest) string { return pyBlock(answers[task.ID]) })
	r := newRunner(t, m, Config{Mode: ModeNone, Concurrency: 2}, nil, nil)
	start := time.Now()
	recs, err := r.Run(context.Background(), Jobs(tasks, 1))
	elapsed := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	s := summarize(r, tasks, recs)
	t.Logf("%d HumanEval tasks with correct answers at concurrency 2: %s (%.0f ms per task)", len(tasks), elapsed.Round(time.Millisecond), float64(elapsed.Milliseconds())/float64(len(tasks)))
	if s.Scored != len(tasks) || s.Final.Passed != len(tasks) || s.PassAt[0].Passed != len(tasks) || s.MeanAttempts != 1 {
		for _, rec := range recs {
			if !rec.Passed {
				t.Errorf("%s failed: %s %s\n%s", rec.TaskID, rec.ScoreClass, rec.Error, rec.ScoreOutput)
			}
		}
		t.Fatalf("summary %+v", s)
	}
	if s.Tokens != int64(120*len(tasks)) {
		t.Errorf("tokens %d, want %d", s.Tokens, 120*len(tasks))
	}
}

// wrongCode defines the entry point with an answer no check accepts.
func wrongCode(task *Task) string {
	return fmt.Sprintf("def %s(*args, **kwargs):\n    return ('wrong answer', object())\n", task.EntryPoint)
}

// In tests mode a model that is wrong at first and right after seeing the
// failing hidden tests scores 0% at attempt 1 and 100% final; the hidden
// tests are not in the first request.
func TestTestsFeedbackWrongThenRight(t *testing.T) {
	tasks, answers := humanEval(t, 8)
	m := newFakeModel(t, tasks, func(task *Task, req chatRequest) string {
		if req.Users == 1 {
			return pyBlock(wrongCode(task))
		}
		return pyBlock(answers[task.ID])
	})
	r := newRunner(t, m, Config{Mode: ModeTests, MaxIterations: 3, Concurrency: 2}, nil, nil)
	recs, err := r.Run(context.Background(), Jobs(tasks, 1))
	if err != nil {
		t.Fatal(err)
	}
	s := summarize(r, tasks, recs)
	failures := 0
	for _, n := range s.ErrorClasses {
		failures += n
	}
	if s.PassAt[0].Passed != 0 || s.PassAt[1].Passed != len(tasks) || s.PassAt[2].Passed != len(tasks) ||
		s.Final.Passed != len(tasks) || s.MeanAttempts != 2 || failures != len(tasks) || s.ErrorClasses["assertion"] == 0 {
		t.Fatalf("summary %+v", s)
	}
	for _, task := range tasks {
		reqs := m.requestsOf(task.ID)
		if len(reqs) != 2 {
			t.Fatalf("%s: %d requests", task.ID, len(reqs))
		}
		if strings.Contains(reqs[0], "def check(") || strings.Contains(reqs[0], "METADATA") {
			t.Errorf("%s: the hidden tests reached the model before any feedback:\n%s", task.ID, reqs[0])
		}
		if !strings.Contains(reqs[1], "acceptance tests failed") || !strings.Contains(reqs[1], "Error") {
			t.Errorf("%s: the repair request lacks the failing tests' output:\n%s", task.ID, reqs[1])
		}
	}
}

// A model answering garbage scores 0% in both feedback modes, with its
// failures classified, and the harness carries on.
func TestGarbageScoresZero(t *testing.T) {
	tasks, _ := humanEval(t, 6)
	garbage := []string{
		"I am sorry, I cannot help with that.",
		pyBlock("def (((:\n    return"),
		pyBlock("import os\nos.system('rm -rf /')\n"),
		pyBlock("raise SystemExit(0)\n"),
	}
	for _, mode := range []Mode{ModeNone, ModeTests} {
		t.Run(string(mode), func(t *testing.T) {
			m := newFakeModel(t, tasks, func(task *Task, req chatRequest) string {
				i := (int(task.ID[len(task.ID)-1]) + req.Users) % len(garbage)
				return garbage[i]
			})
			r := newRunner(t, m, Config{Mode: mode, MaxIterations: 2, Concurrency: 2}, nil, nil)
			recs, err := r.Run(context.Background(), Jobs(tasks, 1))
			if err != nil {
				t.Fatal(err)
			}
			s := summarize(r, tasks, recs)
			if s.Scored != len(tasks) || s.Final.Passed != 0 || s.PassAt[len(s.PassAt)-1].Passed != 0 || s.Errors != 0 {
				t.Fatalf("summary %+v", s)
			}
			if len(s.ErrorClasses) == 0 || len(s.ScoreClasses) == 0 {
				t.Errorf("no error classes: %+v", s)
			}
		})
	}
}

// An evaluation interrupted after a few tasks leaves a valid results file;
// run again with it, only the rest runs, and every task is scored once.
func TestInterruptedEvalResumes(t *testing.T) {
	tasks, answers := humanEval(t, 10)
	m := newFakeModel(t, tasks, func(task *Task, _ chatRequest) string { return pyBlock(answers[task.ID]) })
	path := filepath.Join(t.TempDir(), "results.jsonl")
	key := Key{"fake-model", ModeNone, 1}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res, err := OpenResults(path)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	r := newRunner(t, m, Config{Mode: ModeNone, Concurrency: 2}, res, func(Record) {
		if n++; n == 4 {
			cancel()
		}
	})
	first, err := r.Run(ctx, Jobs(tasks, 1))
	res.Close()
	if !errors.Is(err, context.Canceled) || len(first) < 4 || len(first) >= len(tasks) {
		t.Fatalf("interrupted run: %d records, err %v", len(first), err)
	}
	prior, err := ReadResults(path)
	if err != nil || len(prior) != len(first) {
		t.Fatalf("results after the interruption: %d records, err %v", len(prior), err)
	}
	scope, todo, err := Plan(tasks, prior, key, Selection{})
	if err != nil || len(scope) != len(tasks) || len(todo) != len(tasks)-len(first) {
		t.Fatalf("plan: scope %d, todo %d, err %v", len(scope), len(todo), err)
	}
	before := map[string]int{}
	for _, task := range tasks {
		before[task.ID] = m.callsOf(task.ID)
	}
	res, err = OpenResults(path)
	if err != nil {
		t.Fatal(err)
	}
	r = newRunner(t, m, Config{Mode: ModeNone, Concurrency: 2}, res, nil)
	if _, err := r.Run(context.Background(), todo); err != nil {
		t.Fatal(err)
	}
	res.Close()
	all, err := ReadResults(path)
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, rec := range all {
		count[rec.TaskID]++
	}
	for _, task := range tasks {
		if count[task.ID] != 1 {
			t.Errorf("%s recorded %d times", task.ID, count[task.ID])
		}
	}
	for _, rec := range first {
		if m.callsOf(rec.TaskID) != before[rec.TaskID] {
			t.Errorf("%s ran again after it was recorded", rec.TaskID)
		}
	}
	if s := summarize(r, tasks, all); s.Final.Passed != len(tasks) {
		t.Errorf("summary %+v", s)
	}

	// --only runs a recorded task again; the report takes the latest line.
	_, todo, err = Plan(tasks, all, key, Selection{Only: []string{tasks[0].ID}})
	if err != nil || len(todo) != 1 || todo[0].Task.ID != tasks[0].ID {
		t.Fatalf("plan --only: %v %v", todo, err)
	}
}

// In self mode the model writes its own tests first (they must fail on
// the stub), then the code; the hidden tests only score, and never reach
// the model.
func TestSelfModeScoresWithHiddenTests(t *testing.T) {
	tasks, answers := humanEval(t, 4)
	m := newFakeModel(t, tasks, func(task *Task, req chatRequest) string {
		if strings.Contains(req.Messages[len(req.Messages)-1], "write its pytest tests") {
			return pyBlock(fmt.Sprintf("from solution import %s\n\ndef test_callable():\n    %s\n", task.EntryPoint,
				"assert "+task.EntryPoint+" is not None and callable("+task.EntryPoint+") and "+task.EntryPoint+".__name__ != 'stub'"))
		}
		return pyBlock(answers[task.ID])
	})
	r := newRunner(t, m, Config{Mode: ModeSelf, MaxIterations: 2, Concurrency: 2}, nil, nil)
	recs, err := r.Run(context.Background(), Jobs(tasks, 1))
	if err != nil {
		t.Fatal(err)
	}
	s := summarize(r, tasks, recs)
	if s.Final.Passed != len(tasks) || s.PassAt[0].Passed != len(tasks) || s.AgentSuccess.Passed != len(tasks) {
		t.Fatalf("summary %+v\n%+v", s, recs)
	}
	// The tests only check that the function exists: its body never runs,
	// its def line does.
	for _, rec := range recs {
		if rec.Coverage == nil || *rec.Coverage <= 0 || *rec.Coverage >= 100 {
			t.Errorf("%s: coverage %v, want the share of lines the tests ran", rec.TaskID, rec.Coverage)
		}
	}
	var md strings.Builder
	s.WriteMarkdown(&md)
	if s.MeanCoverage == nil || s.CoverageSamples != len(tasks) || !strings.Contains(md.String(), "mean line coverage of the final code by the agent's own tests") {
		t.Errorf("mean coverage %v over %d samples\n%s", s.MeanCoverage, s.CoverageSamples, md.String())
	}
	for _, task := range tasks {
		for _, req := range m.requestsOf(task.ID) {
			if strings.Contains(req, "def check(") {
				t.Errorf("%s: the hidden tests reached the model", task.ID)
			}
		}
	}
}

// The scorer scores the code the model wrote, not the redacted copy the
// agent shows: a key-shaped literal the code depends on stays intact. What
// is recorded of a failure is still redacted.
func TestScoresCodeAsWrittenNotRedacted(t *testing.T) {
	tasks, answers := humanEval(t, 2)
	const key = "sk-live-0123456789abcdefghij"
	m := newFakeModel(t, tasks, func(task *Task, _ chatRequest) string {
		code := answers[task.ID] + "\n_KEY = \"" + key + "\"\nif len(_KEY) != 28:\n    " + task.EntryPoint + " = None\n"
		if task.ID == "HumanEval/1" {
			code += "print(_KEY)\nraise ValueError(_KEY)\n"
		}
		return pyBlock(code)
	})
	r := newRunner(t, m, Config{Mode: ModeNone, Concurrency: 2}, nil, nil)
	recs, err := r.Run(context.Background(), Jobs(tasks, 1))
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range recs {
		switch rec.TaskID {
		case "HumanEval/0":
			if !rec.Passed {
				t.Errorf("the code with its key literal failed: %s %s", rec.ScoreClass, rec.ScoreOutput)
			}
		case "HumanEval/1":
			if rec.Passed || strings.Contains(rec.ScoreOutput, key) || !strings.Contains(rec.ScoreOutput, "ValueError") {
				t.Errorf("the failure's output is not redacted, or lacks the error:\n%s", rec.ScoreOutput)
			}
		}
	}
}

// A model the server cannot load dooms every task, like a wrong key.
func TestModelLoadFailureIsFatal(t *testing.T) {
	if !fatal(fmt.Errorf("task 1: %w", &llm.Error{Kind: llm.KindModelLoad})) || fatal(&llm.Error{Kind: llm.KindServer}) {
		t.Error("fatal: want true for model_load, false for server")
	}
}
