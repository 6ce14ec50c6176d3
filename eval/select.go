package eval

import (
	"fmt"
	"sort"
	"strings"
)

// Selection says which tasks of a suite an evaluation covers and runs.
type Selection struct {
	// Limit keeps the first Limit tasks (0: all); the report covers them.
	Limit int
	// Only runs these task ids again even when they have a record.
	Only []string
	// Samples is how many independent samples (agent runs) each task gets;
	// 0 means 1.
	Samples int
}

// Job is one sample of one task to run. Code, when set, is a completion
// to score as it is, without a model (--samples-file).
type Job struct {
	Task   *Task
	Sample int
	Code   string
}

// Jobs returns samples jobs for each task, task by task.
func Jobs(tasks []Task, samples int) []Job {
	samples = max(samples, 1)
	out := make([]Job, 0, len(tasks)*samples)
	for i := range tasks {
		for s := 0; s < samples; s++ {
			out = append(out, Job{Task: &tasks[i], Sample: s})
		}
	}
	return out
}

// Plan returns the tasks in scope (the report's denominator) and the jobs
// to run: every sample below sel.Samples of a task in scope without a
// finished record for key in prior (records with an Error are retried),
// or, with Only, every sample of exactly those tasks.
func Plan(tasks []Task, prior []Record, key Key, sel Selection) (scope []Task, todo []Job, err error) {
	samples := max(sel.Samples, 1)
	scope = tasks
	if sel.Limit > 0 && sel.Limit < len(scope) {
		scope = scope[:sel.Limit]
	}
	if len(sel.Only) > 0 {
		byID := map[string]int{}
		for i, t := range scope {
			byID[t.ID] = i
		}
		var unknown []string
		seen := map[string]bool{}
		for _, id := range sel.Only {
			i, ok := byID[id]
			switch {
			case !ok:
				unknown = append(unknown, id)
			case !seen[id]:
				seen[id] = true
				todo = append(todo, Jobs(scope[i:i+1], samples)...)
			}
		}
		if len(unknown) > 0 {
			return nil, nil, fmt.Errorf("--only: no task %s in the selection", strings.Join(unknown, ", "))
		}
		return scope, todo, nil
	}
	done := map[sampleKey]bool{}
	for _, r := range Latest(prior, key) {
		done[sampleKey{r.TaskID, r.Sample}] = r.Error == ""
	}
	for i := range scope {
		for s := 0; s < samples; s++ {
			if !done[sampleKey{scope[i].ID, s}] {
				todo = append(todo, Job{Task: &scope[i], Sample: s})
			}
		}
	}
	return scope, todo, nil
}

// InScope keeps the records of tasks in scope whose sample is below
// samples (all samples when samples <= 0), in the scope's order and then
// by sample.
func InScope(recs []Record, scope []Task, samples int) []Record {
	byID := map[string][]Record{}
	for _, r := range recs {
		if samples <= 0 || r.Sample < samples {
			byID[r.TaskID] = append(byID[r.TaskID], r)
		}
	}
	var out []Record
	for _, t := range scope {
		rs := byID[t.ID]
		sort.SliceStable(rs, func(i, j int) bool { return rs[i].Sample < rs[j].Sample })
		out = append(out, rs...)
	}
	return out
}
