package dataanalysis

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/codeagent/codeagent/eval"
	"github.com/codeagent/codeagent/safety"
	"github.com/codeagent/codeagent/sandbox/backends"
)

func TestSuiteLoads(t *testing.T) {
	s, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	if s.Name != Name || len(s.Tasks) < 10 {
		t.Fatalf("suite %s with %d tasks", s.Name, len(s.Tasks))
	}
	for _, task := range s.Tasks {
		if task.Format != eval.FormatCodeagent || len(task.Files) == 0 || task.Test == "" || task.Timeout == 0 {
			t.Errorf("task %s: %+v", task.ID, task)
		}
		if _, err := os.Stat(filepath.Join("testdata", "reference", task.ID+".py")); err != nil {
			t.Errorf("task %s has no reference solution: %v", task.ID, err)
		}
	}
}

// Every acceptance test fails against a program that does nothing and
// passes against the reference solution, which the checker accepts.
func TestAcceptanceTestsAgainstStubAndReference(t *testing.T) {
	s, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	sb, err := backends.Open("auto", backends.Options{Warm: 2})
	if err != nil {
		t.Skipf("no sandbox here: %v", err)
	}
	defer sb.Close()
	ck, err := safety.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	sc := &eval.Scorer{Sandbox: sb}
	sem := make(chan struct{}, 2)
	var wg sync.WaitGroup
	for i := range s.Tasks {
		task := &s.Tasks[i]
		ref, err := os.ReadFile(filepath.Join("testdata", "reference", task.ID+".py"))
		if err != nil {
			t.Errorf("%s: %v", task.ID, err)
			continue
		}
		rep, err := ck.Check(context.Background(), safety.Python, ref)
		if err != nil || !rep.Safe() {
			t.Errorf("%s: the checker rejects the reference: %v %+v", task.ID, err, rep.Findings)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			stub, err := sc.Score(context.Background(), task, "print('not implemented yet')\n")
			if err != nil || stub.Passed {
				t.Errorf("%s: the acceptance test passes a stub (err %v)", task.ID, err)
			}
			good, err := sc.Score(context.Background(), task, string(ref))
			if err != nil || !good.Passed {
				t.Errorf("%s: the reference fails (err %v): %s\n%s", task.ID, err, good.Class, good.Output)
			}
		}()
	}
	wg.Wait()
}
