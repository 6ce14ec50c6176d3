package session

import (
	"fmt"
	"strings"

	"github.com/codeagent/codeagent/store"
)

// Budgets of the history given to the model: the whole summary, and each
// turn's code and output within it.
const (
	historyBudget = 8000
	codeBudget    = 2500
	outputBudget  = 800
)

// Summary renders a session's earlier turns for the model, oldest first:
// task, outcome, files, output and final code, each clipped. When the
// whole does not fit, the code of the oldest turns goes first, then the
// oldest turns themselves: the latest turn matters most.
func Summary(turns []store.Turn) string {
	parts := make([]string, len(turns))
	withCode := make([]bool, len(turns))
	for i := range turns {
		withCode[i] = true
		parts[i] = turnSummary(turns[i], true)
	}
	total := func() int {
		n := 0
		for _, p := range parts {
			n += len(p)
		}
		return n
	}
	for i := 0; total() > historyBudget && i < len(turns)-1; i++ {
		parts[i] = turnSummary(turns[i], false)
	}
	for i := 0; total() > historyBudget && i < len(turns)-1; i++ {
		parts[i] = ""
	}
	return strings.Join(nonEmpty(parts), "\n")
}

func nonEmpty(ss []string) []string {
	var out []string
	for _, s := range ss {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

func turnSummary(t store.Turn, code bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Turn %d (%s): %s\n", t.Seq, t.Status, strings.TrimSpace(t.Task))
	if len(t.Artifacts) > 0 {
		names := make([]string, len(t.Artifacts))
		for i, a := range t.Artifacts {
			names[i] = a.Path
		}
		fmt.Fprintf(&b, "Files it created or changed: %s\n", strings.Join(names, ", "))
	}
	if out := strings.TrimSpace(t.Output); out != "" {
		fmt.Fprintf(&b, "Its output:\n%s\n", clip(out, outputBudget))
	}
	if code && strings.TrimSpace(t.Code) != "" {
		fmt.Fprintf(&b, "Its final program:\n```\n%s\n```\n", clip(strings.TrimSpace(t.Code), codeBudget))
	}
	return b.String()
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + fmt.Sprintf("\n[... %d more bytes]", len(s)-cut)
}
