package eval

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
)

// Summary aggregates the records of one configuration.
type Summary struct {
	Suite         string `json:"suite"`
	Model         string `json:"model"`
	Mode          Mode   `json:"mode"`
	MaxIterations int    `json:"max_iterations"`
	// Tasks is how many tasks the suite selection holds; Scored how many
	// have a record.
	Tasks  int `json:"tasks"`
	Scored int `json:"scored"`
	// Samples is how many records (samples: independent agent runs, or
	// completions of a samples file) there are over the scored tasks, and
	// MinSamples the fewest any scored task has. The per-attempt rates
	// below are over Samples; with one sample a task they are over tasks.
	Samples    int `json:"samples"`
	MinSamples int `json:"min_samples_per_task"`
	// PassAt[k-1] counts samples whose code passed by attempt k of the
	// agent's loop ("pass@attempt k"); it is not Chen et al.'s pass@k.
	PassAt []Rate `json:"pass_at_attempt"`
	// Final counts samples whose final code passes.
	Final Rate `json:"final"`
	// PassK is the unbiased pass@k estimate (Chen et al. 2021) over the
	// scored tasks, for each k asked for that no task has fewer samples
	// than; NotEstimated lists the other ks.
	PassK        []PassK `json:"pass_at_k"`
	NotEstimated []int   `json:"pass_at_k_not_estimated,omitempty"`
	// Settings are the scoring limits of the records (one entry unless
	// runs with different settings were combined).
	Settings     []string `json:"score_settings"`
	AgentSuccess Rate     `json:"agent_success"`
	MeanAttempts float64  `json:"mean_attempts"`
	// MeanCoverage is the mean line coverage of the final code by the
	// agent's own tests over the CoverageSamples samples that report it
	// (self mode: the agent succeeded and coverage was measured).
	MeanCoverage    *float64 `json:"mean_coverage,omitempty"`
	CoverageSamples int      `json:"coverage_samples,omitempty"`
	// ErrorClasses counts the classes of failed attempts; ScoreClasses why
	// final code failed the hidden tests.
	ErrorClasses map[string]int `json:"error_classes"`
	ScoreClasses map[string]int `json:"score_classes"`
	// Errors are tasks that could not be run to their end.
	Errors        int     `json:"errors"`
	Tokens        int64   `json:"tokens"`
	TokensPerTask float64 `json:"tokens_per_task"`
	WallMSPerTask float64 `json:"wall_ms_per_task"`
	WallMSMax     int64   `json:"wall_ms_max"`
	// Failed are the tasks none of whose samples passed.
	Failed []string `json:"failed"`
	// ElapsedMS is the evaluation's own wall time, when known.
	ElapsedMS int64 `json:"elapsed_ms,omitempty"`
}

// PassK is pass@k: the expected share of tasks for which at least one of
// k samples passes, estimated without bias from n >= k samples of which c
// pass as 1 - C(n-c, k) / C(n, k), averaged over tasks.
type PassK struct {
	K    int     `json:"k"`
	Rate float64 `json:"rate"`
}

// PassAtK is Chen et al.'s estimator for one task: 1 - C(n-c, k)/C(n, k),
// computed as a product, which neither overflows nor loses precision.
func PassAtK(n, c, k int) float64 {
	if n-c < k {
		return 1
	}
	p := 1.0
	for i := n - c + 1; i <= n; i++ {
		p *= 1 - float64(k)/float64(i)
	}
	return 1 - p
}

// DefaultKs are the ks reported when none are asked for: 1, and 5 when
// every task has at least 5 samples.
func DefaultKs(samples int) []int {
	if samples >= 5 {
		return []int{1, 5}
	}
	return []int{1}
}

// Rate is a count of passing samples and its share of the scored ones.
type Rate struct {
	Passed int     `json:"passed"`
	Rate   float64 `json:"rate"`
}

func (r Rate) String() string {
	return fmt.Sprintf("%.1f%% (%d)", 100*r.Rate, r.Passed)
}

// Summarize aggregates recs (the latest per sample of each task, of one
// configuration) over a selection of tasks tasks long, with pass@k for
// each of ks (DefaultKs when none).
func Summarize(suite string, key Key, tasks int, recs []Record, ks ...int) Summary {
	s := Summary{Suite: suite, Model: key.Model, Mode: key.Mode, MaxIterations: key.MaxIterations, Tasks: tasks,
		Samples: len(recs), PassAt: make([]Rate, max(key.MaxIterations, 1)), PassK: []PassK{}, Settings: []string{},
		ErrorClasses: map[string]int{}, ScoreClasses: map[string]int{}, Failed: []string{}}
	type count struct{ n, c int }
	per := map[string]*count{}
	var order []string
	settings := map[string]bool{}
	attempts := 0
	var wall int64
	coverage := 0.0
	for _, r := range recs {
		if per[r.TaskID] == nil {
			per[r.TaskID] = &count{}
			order = append(order, r.TaskID)
		}
		per[r.TaskID].n++
		if r.Passed {
			per[r.TaskID].c++
		}
		if r.ScoreSettings != "" && !settings[r.ScoreSettings] {
			settings[r.ScoreSettings] = true
			s.Settings = append(s.Settings, r.ScoreSettings)
		}
		for k := range s.PassAt {
			if r.FirstPassAttempt > 0 && r.FirstPassAttempt <= k+1 {
				s.PassAt[k].Passed++
			}
		}
		if r.Passed {
			s.Final.Passed++
		} else {
			if r.ScoreClass != "" {
				s.ScoreClasses[string(r.ScoreClass)]++
			}
		}
		if r.AgentSuccess {
			s.AgentSuccess.Passed++
		}
		if r.Error != "" {
			s.Errors++
		}
		for _, c := range r.ErrorClasses {
			s.ErrorClasses[string(c)]++
		}
		if r.Coverage != nil {
			coverage += *r.Coverage
			s.CoverageSamples++
		}
		attempts += r.Attempts
		s.Tokens += r.Tokens
		wall += r.WallMS
		s.WallMSMax = max(s.WallMSMax, r.WallMS)
	}
	if n := float64(len(recs)); n > 0 {
		for k := range s.PassAt {
			s.PassAt[k].Rate = float64(s.PassAt[k].Passed) / n
		}
		s.Final.Rate = float64(s.Final.Passed) / n
		s.AgentSuccess.Rate = float64(s.AgentSuccess.Passed) / n
		s.MeanAttempts = float64(attempts) / n
		s.TokensPerTask = float64(s.Tokens) / n
		s.WallMSPerTask = float64(wall) / n
	}
	if s.CoverageSamples > 0 {
		mean := coverage / float64(s.CoverageSamples)
		s.MeanCoverage = &mean
	}
	s.Scored = len(order)
	for _, id := range order {
		if per[id].c == 0 {
			s.Failed = append(s.Failed, id)
		}
	}
	for i, id := range order {
		if i == 0 || per[id].n < s.MinSamples {
			s.MinSamples = per[id].n
		}
	}
	if len(ks) == 0 {
		ks = DefaultKs(s.MinSamples)
	}
	for _, k := range ks {
		if k < 1 || k > s.MinSamples {
			s.NotEstimated = append(s.NotEstimated, k)
			continue
		}
		sum := 0.0
		for _, id := range order {
			sum += PassAtK(per[id].n, per[id].c, k)
		}
		s.PassK = append(s.PassK, PassK{K: k, Rate: sum / float64(len(order))})
	}
	return s
}

// WriteJSON writes the summary as one indented JSON object.
func (s Summary) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(s); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return nil
}

// WriteMarkdown writes the summary as a Markdown section with one table.
func (s Summary) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "## %s · %s · feedback %s · up to %d attempt(s)\n\n", s.Suite, s.Model, s.Mode, s.MaxIterations)
	head := []string{"tasks"}
	for k := range s.PassAt {
		head = append(head, fmt.Sprintf("pass@attempt %d", k+1))
	}
	head = append(head, "final", "mean attempts", "tokens/task", "wall/task")
	row := []string{scoredOf(s)}
	if s.Samples > s.Scored {
		head = append([]string{"tasks", "samples"}, head[1:]...)
		row = append(row, fmt.Sprint(s.Samples))
	}
	for _, r := range s.PassAt {
		row = append(row, r.String())
	}
	row = append(row, s.Final.String(), fmt.Sprintf("%.2f", s.MeanAttempts), fmt.Sprintf("%.0f", s.TokensPerTask), seconds(s.WallMSPerTask))
	writeTable(&b, head, [][]string{row})
	b.WriteString("\n")
	fmt.Fprintf(&b, "- %s\n", s.passKLine())
	fmt.Fprintf(&b, "- scoring settings: %s\n", settingsOf(s.Settings))
	fmt.Fprintf(&b, "- error classes of failed attempts: %s\n", classes(s.ErrorClasses))
	fmt.Fprintf(&b, "- why final code failed the tests: %s\n", classes(s.ScoreClasses))
	if strings.HasPrefix(s.Model, SamplesModelPrefix) {
		fmt.Fprintf(&b, "- scored without a model; longest sample %s", seconds(float64(s.WallMSMax)))
	} else {
		fmt.Fprintf(&b, "- the agent's own verdict: success on %s; longest task %s; %d tokens in all",
			s.AgentSuccess, seconds(float64(s.WallMSMax)), s.Tokens)
	}
	if s.ElapsedMS > 0 {
		fmt.Fprintf(&b, "; this run took %s", seconds(float64(s.ElapsedMS)))
	}
	b.WriteString("\n")
	if s.MeanCoverage != nil {
		fmt.Fprintf(&b, "- mean line coverage of the final code by the agent's own tests: %.1f%% (%d sample(s) where it succeeded)\n",
			*s.MeanCoverage, s.CoverageSamples)
	}
	if s.Errors > 0 {
		fmt.Fprintf(&b, "- %d task(s) could not be run to the end; run again with the same --results to retry them\n", s.Errors)
	}
	if len(s.Failed) > 0 {
		shown := s.Failed
		if len(shown) > 30 {
			shown = shown[:30]
		}
		fmt.Fprintf(&b, "- failed: %s", strings.Join(shown, ", "))
		if len(s.Failed) > len(shown) {
			fmt.Fprintf(&b, " and %d more", len(s.Failed)-len(shown))
		}
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// passKLine renders the pass@k estimates.
func (s Summary) passKLine() string {
	var parts []string
	for _, p := range s.PassK {
		parts = append(parts, fmt.Sprintf("pass@%d %.1f%%", p.K, 100*p.Rate))
	}
	line := "pass@k (unbiased estimate of Chen et al. 2021 over the scored tasks"
	if s.Scored > 0 {
		line += fmt.Sprintf(", %d or more sample(s) each", s.MinSamples)
	}
	line += "): "
	if len(parts) == 0 {
		line += "none"
	} else {
		line += strings.Join(parts, ", ")
	}
	if len(s.NotEstimated) > 0 {
		ks := make([]string, len(s.NotEstimated))
		for i, k := range s.NotEstimated {
			ks[i] = fmt.Sprint(k)
		}
		line += fmt.Sprintf("; not estimated for k = %s (it needs that many samples a task: --samples)", strings.Join(ks, ", "))
	}
	return line
}

func settingsOf(s []string) string {
	switch len(s) {
	case 0:
		return "not recorded"
	case 1:
		return s[0]
	}
	return "MIXED: " + strings.Join(s, " | ")
}

func scoredOf(s Summary) string {
	if s.Scored == s.Tasks {
		return fmt.Sprint(s.Tasks)
	}
	return fmt.Sprintf("%d of %d", s.Scored, s.Tasks)
}

func classes(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if m[keys[i]] != m[keys[j]] {
			return m[keys[i]] > m[keys[j]]
		}
		return keys[i] < keys[j]
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

func seconds(ms float64) string {
	return (time.Duration(ms) * time.Millisecond).Round(100 * time.Millisecond).String()
}

func writeTable(b *strings.Builder, head []string, rows [][]string) {
	b.WriteString("| " + strings.Join(head, " | ") + " |\n|")
	for range head {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, r := range rows {
		b.WriteString("| " + strings.Join(r, " | ") + " |\n")
	}
}
