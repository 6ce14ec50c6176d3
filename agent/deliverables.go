package agent

import (
	"path"
	"sort"
	"strings"

	"github.com/codeagent/codeagent/internal/lazyre"
	"github.com/codeagent/codeagent/workspace"
)

// deliverableName matches a file name with an extension that a task may
// ask a program to write: a plot, a table, a report, a page.
var deliverableName = lazyre.New(`(?i)(?:^|[\s"'` + "`" + `(\[])((?:[\w-]+/)*[\w][\w.-]*\.(?:png|jpe?g|svg|gif|pdf|csv|tsv|txt|json|jsonl|html|md|xlsx|parquet|xml|yaml|yml))\b`)

// deliverables are the files the task names that the workspace did not
// hold when the run began (those it held are inputs): what a successful
// program must leave behind. At most 20.
func deliverables(task string, before workspace.Snapshot) []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range deliverableName.FindAllStringSubmatch(task, -1) {
		name := path.Clean(m[1])
		if seen[name] || strings.HasPrefix(name, "..") || len(out) == 20 {
			continue
		}
		seen[name] = true
		if _, held := before.Files[name]; held {
			continue
		}
		out = append(out, name)
	}
	return out
}

// missingDeliverables are the task's deliverables that the workspace does
// not hold now.
func (r *run) missingDeliverables() []string {
	if len(r.deliver) == 0 {
		return nil
	}
	now, err := r.ws.Snapshot(r.a.cfg.Artifacts)
	if err != nil {
		return nil
	}
	var missing []string
	for _, name := range r.deliver {
		if _, ok := now.Files[name]; !ok {
			missing = append(missing, name)
		}
	}
	sort.Strings(missing)
	return missing
}
