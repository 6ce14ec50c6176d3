package mcpserver

import (
	"github.com/codeagent/codeagent/agent"
	"github.com/codeagent/codeagent/safety"
	"testing"
)

// A check that passed with lint warnings says so in run_task's progress;
// "no findings" is for a check without any.
func TestDescribeCheckedCountsWarnings(t *testing.T) {
	yes, no := true, false
	lint := safety.Finding{Rule: "undefined-name", Kind: safety.KindLint}
	danger := safety.Finding{Rule: "forbidden-import"}
	for _, c := range []struct {
		safe     *bool
		findings []safety.Finding
		want     string
	}{
		{&yes, nil, "attempt 1/3: checked, no findings"},
		{&yes, []safety.Finding{lint}, "attempt 1/3: checked, passed with 1 warning(s)"},
		{&no, []safety.Finding{danger, lint}, "attempt 1/3: checked, 1 finding(s)"},
	} {
		e := agent.Event{Type: agent.EventChecked, Attempt: 1, MaxAttempts: 3, Safe: c.safe, Findings: c.findings}
		if got := describe(e); got != c.want {
			t.Errorf("%+v: %q, want %q", c.findings, got, c.want)
		}
	}
}
