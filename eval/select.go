package eval

import (
	"fmt"
	"strings"
)

// Selection says which tasks of a suite an evaluation covers and runs.
type Selection struct {
	// Limit keeps the first Limit tasks (0: all); the report covers them.
	Limit int
	// Only runs these task ids again even when they have a record.
	Only []string
}

// Plan returns the tasks in scope (the report's denominator) and those to
// run: every task in scope without a finished record for key in prior
// (records with an Error are retried), or, with Only, exactly those tasks.
func Plan(tasks []Task, prior []Record, key Key, sel Selection) (scope, todo []Task, err error) {
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
				todo = append(todo, scope[i])
			}
		}
		if len(unknown) > 0 {
			return nil, nil, fmt.Errorf("--only: no task %s in the selection", strings.Join(unknown, ", "))
		}
		return scope, todo, nil
	}
	done := map[string]bool{}
	for _, r := range Latest(prior, key) {
		done[r.TaskID] = r.Error == ""
	}
	for _, t := range scope {
		if !done[t.ID] {
			todo = append(todo, t)
		}
	}
	return scope, todo, nil
}

// InScope keeps the records of tasks in scope, in the scope's order.
func InScope(recs []Record, scope []Task) []Record {
	byID := map[string]Record{}
	for _, r := range recs {
		byID[r.TaskID] = r
	}
	var out []Record
	for _, t := range scope {
		if r, ok := byID[t.ID]; ok {
			out = append(out, r)
		}
	}
	return out
}
