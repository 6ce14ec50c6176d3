package eval

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/codeagent/codeagent/agent"
)

func rec(id, model string, mode Mode, k, first, attempts int, passed bool, classes ...agent.ErrorClass) Record {
	return Record{TaskID: id, Suite: "s", Model: model, Mode: mode, MaxIterations: k, FirstPassAttempt: first,
		Attempts: attempts, Passed: passed, ErrorClasses: classes, Tokens: 100, WallMS: 2000}
}

func TestSummarizeAndRender(t *testing.T) {
	recs := []Record{
		rec("a", "m", ModeTests, 3, 1, 1, true),
		rec("b", "m", ModeTests, 3, 2, 2, true, agent.ClassAssertion),
		rec("c", "m", ModeTests, 3, 0, 3, false, agent.ClassAssertion, agent.ClassSyntax, agent.ClassAssertion),
		rec("d", "m", ModeTests, 3, 3, 3, true, agent.ClassValue, agent.ClassAssertion),
	}
	recs[2].ScoreClass = agent.ClassAssertion
	s := Summarize("s", Key{"m", ModeTests, 3}, 5, recs)
	if s.Scored != 4 || s.PassAt[0].Passed != 1 || s.PassAt[1].Passed != 2 || s.PassAt[2].Passed != 3 || s.Final.Passed != 3 ||
		s.MeanAttempts != 2.25 || s.ErrorClasses["assertion"] != 4 || s.ScoreClasses["assertion"] != 1 || s.Failed[0] != "c" {
		t.Fatalf("summary %+v", s)
	}
	var md bytes.Buffer
	if err := s.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## s · m · feedback tests · up to 3 attempt(s)", "| tasks | pass@attempt 1 | pass@attempt 2 | pass@attempt 3 | final |",
		"| 4 of 5 | 25.0% (1) | 50.0% (2) | 75.0% (3) | 75.0% (3) | 2.25 | 100 | 2s |", "assertion 4, syntax 1, value 1", "failed: c"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, md.String())
		}
	}
	var js bytes.Buffer
	s.WriteJSON(&js)
	var back Summary
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || back.Final.Passed != 3 || len(back.PassAt) != 3 {
		t.Errorf("json %v: %s", err, js.String())
	}
}

func TestResultsFileRoundTripAndCutTail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.jsonl")
	w, err := OpenResults(path)
	if err != nil {
		t.Fatal(err)
	}
	a := rec("a", "m", ModeNone, 1, 1, 1, true)
	a.Time = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	w.Append(a)
	w.Append(rec("b", "m", ModeNone, 1, 0, 1, false))
	w.Close()
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"task_id": "c", "mod`) // a write cut short
	f.Close()
	got, err := ReadResults(path)
	if err != nil || len(got) != 2 || got[0].TaskID != "a" || !got[0].Time.Equal(a.Time) {
		t.Fatalf("read %+v, %v", got, err)
	}
	w, _ = OpenResults(path) // completes the cut line, so the next record stands alone
	w.Append(rec("c", "m", ModeNone, 1, 1, 1, true))
	w.Close()
	if _, err := ReadResults(path); err == nil || !strings.Contains(err.Error(), "r.jsonl:3: not a result record") {
		t.Errorf("a broken line inside the file: %v", err)
	}
	if recs, err := ReadResults(filepath.Join(t.TempDir(), "none.jsonl")); err != nil || recs != nil {
		t.Errorf("missing file: %v %v", recs, err)
	}
}

func TestPlanAndLatest(t *testing.T) {
	tasks := []Task{{ID: "a"}, {ID: "b"}, {ID: "c"}, {ID: "d"}}
	key := Key{"m", ModeNone, 1}
	errRec := rec("b", "m", ModeNone, 1, 0, 0, false)
	errRec.Error = "provider failed"
	prior := []Record{rec("a", "m", ModeNone, 1, 1, 1, true), errRec, rec("c", "other", ModeNone, 1, 1, 1, true)}
	scope, todo, err := Plan(tasks, prior, key, Selection{Limit: 3})
	if err != nil || len(scope) != 3 || len(todo) != 2 || todo[0].Task.ID != "b" || todo[1].Task.ID != "c" {
		t.Fatalf("plan: %v %v %v", scope, todo, err)
	}
	if _, _, err := Plan(tasks, prior, key, Selection{Limit: 2, Only: []string{"c"}}); err == nil || !strings.Contains(err.Error(), "no task c") {
		t.Errorf("--only outside the selection: %v", err)
	}
	again := append(prior, rec("a", "m", ModeNone, 1, 0, 1, false))
	if l := Latest(again, key); len(l) != 2 || l[0].TaskID != "a" || l[0].Passed {
		t.Errorf("latest %+v", l)
	}
}

func TestCompare(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, recs ...Record) string {
		p := filepath.Join(dir, name)
		w, _ := OpenResults(p)
		for _, r := range recs {
			w.Append(r)
		}
		w.Close()
		return p
	}
	a := write("a.jsonl", rec("x", "small", ModeNone, 1, 1, 1, true), rec("y", "small", ModeNone, 1, 0, 1, false), rec("z", "small", ModeNone, 1, 1, 1, true))
	b := write("b.jsonl", rec("x", "big", ModeNone, 1, 1, 1, true), rec("y", "big", ModeNone, 1, 1, 1, true))
	c, err := Compare([]string{a, b})
	if err != nil {
		t.Fatal(err)
	}
	if c.Common != 2 || len(c.Runs) != 2 || c.Runs[0].Summary.Final.Passed != 1 || c.Runs[1].Summary.Final.Passed != 2 ||
		len(c.OnlySecond) != 1 || c.OnlySecond[0] != "y" || len(c.OnlyFirst) != 0 {
		t.Fatalf("comparison %+v", c)
	}
	var md bytes.Buffer
	c.WriteMarkdown(&md)
	for _, want := range []string{"Comparison on the 2 task(s)", "| 1: " + a + " | small | none, ≤1 | 50.0% (1) | 50.0% (1) |", "only run 2 passes: 1 task(s): y"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, md.String())
		}
	}
	if _, err := Compare([]string{a}); err == nil {
		t.Error("one configuration compared")
	}
}

func TestProgressBar(t *testing.T) {
	var b bytes.Buffer
	p := NewProgress(&b, 4)
	p.Record(Record{Passed: true})
	p.Record(Record{Error: "x"})
	p.Finish()
	out := b.String()
	for _, want := range []string{"[------------------------] 0/4", "[############------------] 2/4 · pass 1 (50.0%) · 1 error(s)", "eta"} {
		if !strings.Contains(out, want) {
			t.Errorf("progress lacks %q: %q", want, out)
		}
	}
}
