package main

import (
	"fmt"
	"strings"

	"github.com/codeagent/codeagent/agent"
	"github.com/codeagent/codeagent/termtext"
)

// tool renders an event of tool mode: a line per verification round
// ("round 1/5 · thinking"), one per tool call ("step 3/20 execute_python
// · running ✓"), and the verdict and replay of each end.
func (p *progress) tool(e agent.Event) string {
	switch e.Type {
	case agent.EventAttemptStart:
		p.endLine()
		p.open = true
		return fmt.Sprintf("round %d/%d (tools) · thinking", e.Attempt, e.MaxAttempts)
	case agent.EventGenerated:
		if e.ErrorClass != "" {
			return p.failed(e.ErrorClass, e.Message)
		}
	case agent.EventToolCall:
		p.endLine()
		p.open = true
		return fmt.Sprintf("  step %d/%d %s", e.Step, e.MaxSteps, termtext.Name(e.Tool))
	case agent.EventChecked:
		if e.Safe != nil && !*e.Safe {
			return p.failed(e.ErrorClass, findingDetail(e))
		}
		return " · running"
	case agent.EventExecuted:
		if e.ErrorClass != "" {
			return p.failed(e.ErrorClass, resultDetail(e))
		}
		p.open = false
		return " ✓\n"
	case agent.EventToolResult:
		if !p.open {
			return "" // the execution closed the line
		}
		if e.ErrorClass != "" {
			first, _, _ := strings.Cut(strings.TrimPrefix(e.ToolResult, "error: "), "\n")
			return p.failed(e.ErrorClass, first)
		}
		p.open = false
		return " ✓\n"
	case agent.EventVerified:
		p.endLine()
		s := fmt.Sprintf("round %d/%d · verified", e.Attempt, e.MaxAttempts)
		if e.Verdict != nil && !e.Verdict.TaskComplete {
			return s + p.failed(agent.ClassIncomplete, e.Verdict.Missing)
		}
		return s + " ✓\n"
	case agent.EventReplayed:
		p.endLine()
		s := fmt.Sprintf("round %d/%d · replayed in a fresh sandbox", e.Attempt, e.MaxAttempts)
		if e.ErrorClass != "" {
			first, _, _ := strings.Cut(strings.TrimPrefix(e.Message, "- "), "\n")
			return s + p.failed(e.ErrorClass, first)
		}
		return s + " ✓\n"
	}
	return ""
}
