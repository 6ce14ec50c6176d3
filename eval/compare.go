package eval

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
)

// Comparison is several configurations measured on the tasks they all
// have a record for.
type Comparison struct {
	// Common is how many tasks every run scored.
	Common int           `json:"common_tasks"`
	Runs   []ComparedRun `json:"runs"`
	// OnlyFirst and OnlySecond, for two runs, are the tasks whose final
	// code passes in one run and not in the other.
	OnlyFirst  []string `json:"only_first,omitempty"`
	OnlySecond []string `json:"only_second,omitempty"`
}

// ComparedRun is one configuration of one results file.
type ComparedRun struct {
	File    string  `json:"file"`
	Summary Summary `json:"summary"`
}

// Compare reads results files; every configuration (model, mode, budget)
// in them is a run, summarised over the tasks common to all runs.
func Compare(files []string) (*Comparison, error) {
	all, err := readAll(files)
	if err != nil {
		return nil, err
	}
	type run struct {
		file string
		key  Key
		recs []Record
	}
	var runs []run
	for i, recs := range all {
		var keys []Key
		seen := map[Key]bool{}
		for _, r := range recs {
			if !seen[r.Key()] {
				seen[r.Key()] = true
				keys = append(keys, r.Key())
			}
		}
		for _, k := range keys {
			runs = append(runs, run{files[i], k, Latest(recs, k)})
		}
	}
	if len(runs) < 2 {
		return nil, fmt.Errorf("compare: %s hold(s) one configuration; give two results files (or one with two models or modes)", strings.Join(files, ", "))
	}
	common := map[string]int{}
	for _, r := range runs {
		seen := map[string]bool{}
		for _, rec := range r.recs {
			if !seen[rec.TaskID] {
				seen[rec.TaskID] = true
				common[rec.TaskID]++
			}
		}
	}
	c := &Comparison{}
	// A task passes in a run when one of its samples passes.
	passed := make([]map[string]bool, len(runs))
	for i, r := range runs {
		var kept []Record
		passed[i] = map[string]bool{}
		tasks := map[string]bool{}
		for _, rec := range r.recs {
			if common[rec.TaskID] == len(runs) {
				kept = append(kept, rec)
				passed[i][rec.TaskID] = passed[i][rec.TaskID] || rec.Passed
				tasks[rec.TaskID] = true
			}
		}
		suite := ""
		if len(kept) > 0 {
			suite = kept[0].Suite
		}
		c.Common = len(tasks)
		c.Runs = append(c.Runs, ComparedRun{File: r.file, Summary: Summarize(suite, r.key, len(tasks), kept, 1)})
	}
	if len(runs) == 2 {
		for id, p := range passed[0] {
			switch q := passed[1][id]; {
			case p && !q:
				c.OnlyFirst = append(c.OnlyFirst, id)
			case q && !p:
				c.OnlySecond = append(c.OnlySecond, id)
			}
		}
		sort.Strings(c.OnlyFirst)
		sort.Strings(c.OnlySecond)
	}
	return c, nil
}

// WriteJSON writes the comparison as one indented JSON object.
func (c *Comparison) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(c); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return nil
}

// WriteMarkdown writes the comparison as a Markdown table, one row per run.
func (c *Comparison) WriteMarkdown(w io.Writer) error {
	maxK := 1
	for _, r := range c.Runs {
		maxK = max(maxK, len(r.Summary.PassAt))
	}
	head := []string{"run", "model", "feedback"}
	for k := 1; k <= maxK; k++ {
		head = append(head, fmt.Sprintf("pass@attempt %d", k))
	}
	head = append(head, "final", "pass@1", "mean attempts", "tokens/task", "wall/task", "scoring settings")
	var rows [][]string
	for i, r := range c.Runs {
		s := r.Summary
		row := []string{fmt.Sprintf("%d: %s", i+1, r.File), s.Model, fmt.Sprintf("%s, ≤%d", s.Mode, s.MaxIterations)}
		for k := 0; k < maxK; k++ {
			if k < len(s.PassAt) {
				row = append(row, s.PassAt[k].String())
			} else {
				row = append(row, "–")
			}
		}
		p1 := "–"
		if len(s.PassK) > 0 {
			p1 = fmt.Sprintf("%.1f%%", 100*s.PassK[0].Rate)
		}
		row = append(row, s.Final.String(), p1, fmt.Sprintf("%.2f", s.MeanAttempts), fmt.Sprintf("%.0f", s.TokensPerTask),
			seconds(s.WallMSPerTask), settingsOf(s.Settings))
		rows = append(rows, row)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "## Comparison on the %d task(s) every run scored\n\n", c.Common)
	writeTable(&b, head, rows)
	if len(c.Runs) == 2 {
		fmt.Fprintf(&b, "\n- only run 1 passes: %s\n- only run 2 passes: %s\n", idList(c.OnlyFirst), idList(c.OnlySecond))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func idList(ids []string) string {
	switch {
	case len(ids) == 0:
		return "none"
	case len(ids) > 30:
		return fmt.Sprintf("%d tasks: %s and %d more", len(ids), strings.Join(ids[:30], ", "), len(ids)-30)
	}
	return fmt.Sprintf("%d task(s): %s", len(ids), strings.Join(ids, ", "))
}
