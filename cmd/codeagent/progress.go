package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/codeagent/codeagent/agent"
	"github.com/codeagent/codeagent/termtext"
)

// progress renders the agent's events as live progress lines on a
// terminal: one line per attempt, growing as it goes
// ("attempt 2/5 · checking · running · verifying ✓"). What the program or
// the model wrote (a traceback's last line, a verdict) is escaped by
// termtext.
type progress struct {
	mu   sync.Mutex
	ctx  context.Context // the run's: once it ends, the done line is left to the caller
	w    io.Writer
	mode progressMode
	open bool // a line is in progress
	// approving: a finding goes to the person, it does not end the attempt.
	approving bool
}

// progressMode says what follows a successful execution.
type progressMode int

const (
	modePlain    progressMode = iota // nothing: the attempt succeeded
	modeVerify                       // the verifier
	modeTests                        // generated tests passed: the program runs next
	modeTestFile                     // the user's tests passed: done
)

func newProgress(ctx context.Context, w io.Writer, mode progressMode) *progress {
	return &progress{ctx: ctx, w: w, mode: mode}
}

// Event implements agent.Observer.
func (p *progress) Event(e agent.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var s string
	switch {
	case e.Type == agent.EventApprovalRequired:
		p.endLine() // the approver asks on the lines that follow
	case e.Type == agent.EventApproval && e.Decision != nil:
		s = fmt.Sprintf("  approval %s: %s by %s", termtext.Name(e.Decision.ID), termtext.Name(e.Decision.Decision), termtext.Name(e.Decision.By))
		if e.Decision.EditSHA256 != "" {
			s += " (edited)"
		}
		s += "\n"
	case e.Type == agent.EventReviewed && e.Review != nil:
		s = " · reviewed"
		if !e.Review.Approve || len(e.Review.Concerns) > 0 {
			s = " · reviewer: " + termtext.Name(shorten(strings.Join(e.Review.Concerns, "; "), 100))
		}
	case e.Phase == agent.PhaseTool:
		s = p.tool(e)
	case e.Type == agent.EventAttemptStart:
		p.endLine()
		what := "attempt"
		if e.Phase == agent.PhaseTests {
			what = "tests"
		}
		s = fmt.Sprintf("%s %d/%d", what, e.Attempt, e.MaxAttempts)
		if e.FreshStart {
			s += " (fresh start)"
		}
		s += " · generating"
		p.open = true
	case e.Type == agent.EventGenerated:
		if e.ErrorClass != "" {
			s = p.failed(e.ErrorClass, e.Message)
		} else {
			s = " · checking"
		}
	case e.Type == agent.EventChecked && p.approving && e.Safe != nil && !*e.Safe:
		s = " · checker: " + termtext.Name(shorten(findingDetail(e), 100))
	case e.Type == agent.EventChecked:
		if e.Safe != nil && !*e.Safe {
			s = p.failed(e.ErrorClass, findingDetail(e))
		} else if e.Phase == agent.PhaseTests {
			s = " · running against a stub"
		} else {
			s = " · running"
		}
	case e.Type == agent.EventExecuted:
		s = p.executed(e)
	case e.Type == agent.EventVerified:
		if e.Verdict != nil && !e.Verdict.TaskComplete {
			s = p.failed(agent.ClassIncomplete, e.Verdict.Missing)
		} else {
			s = " ✓"
			p.open = false
			s += "\n"
		}
	case e.Type == agent.EventDone:
		p.endLine()
		if _, stopped := interruptedBy(p.ctx); stopped {
			return // the command says so in one line
		}
		if e.Success != nil && *e.Success {
			s = fmt.Sprintf("done: success after %d %s in %.1fs\n", e.Attempt, rounds(e), float64(e.DurationMS)/1000)
		} else {
			s = fmt.Sprintf("done: failed after %d %s: %s\n", e.Attempt, rounds(e), termtext.Name(e.Message))
		}
	}
	io.WriteString(p.w, s)
}

// rounds names what a run's done event counts: attempts, or a tool-mode
// run's verification rounds.
func rounds(e agent.Event) string {
	if e.Mode == agent.ModeTools {
		return "round(s)"
	}
	return "attempt(s)"
}

func (p *progress) executed(e agent.Event) string {
	if e.Phase == agent.PhaseTests {
		switch e.Tests {
		case "failed":
			p.open = false
			return " · they fail on the stub, as they should ✓\n"
		case "passed":
			return p.failed(agent.ClassVacuousTests, "the tests pass against a stub")
		case "none":
			return p.failed(agent.ClassVacuousTests, "no tests found")
		}
	}
	if e.ErrorClass != "" {
		detail := resultDetail(e)
		if e.Result != nil && e.Result.Status == "error" && p.mode != modeVerify && p.mode != modePlain && e.Phase == agent.PhaseCode {
			detail = lastNonEmpty(e.Result.Stdout) // pytest's summary
		}
		return p.failed(e.ErrorClass, detail)
	}
	switch {
	case e.Phase == agent.PhaseProgram:
	case p.mode == modeVerify:
		return " · verifying"
	case p.mode == modeTests:
		return " · tests pass · running the program"
	case p.mode == modeTestFile:
		p.open = false
		return " · tests pass ✓\n"
	}
	p.open = false
	return " ✓\n"
}

// failed ends the line with the error class and a short detail.
func (p *progress) failed(class agent.ErrorClass, detail string) string {
	p.open = false
	detail = strings.TrimSpace(detail)
	if r := []rune(detail); len(r) > 100 {
		detail = string(r[:100]) + "..."
	}
	if detail != "" {
		return fmt.Sprintf(" ✗ %s: %s\n", termtext.Name(string(class)), termtext.Name(detail))
	}
	return fmt.Sprintf(" ✗ %s\n", termtext.Name(string(class)))
}

func (p *progress) endLine() {
	if p.open {
		io.WriteString(p.w, "\n")
		p.open = false
	}
}

// findingDetail is the first finding of a checked event, in short.
func findingDetail(e agent.Event) string {
	if len(e.Findings) == 0 {
		return ""
	}
	return fmt.Sprintf("line %d: %s", e.Findings[0].Line, e.Findings[0].Message)
}

// resultDetail is why an executed event's run failed: the error's last
// line, or the sandbox's message.
func resultDetail(e agent.Event) string {
	switch {
	case e.Result == nil:
		return ""
	case e.Result.Status == "error":
		return lastNonEmpty(e.Result.Stderr)
	}
	return e.Result.Message
}

func lastNonEmpty(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// runObservers builds the progress renderer and the event writer.
func runObservers(ctx context.Context, o runOptions, s stdio) (agent.Observer, func(), error) {
	var obs []agent.Observer
	closeFn := func() {}
	if o.Progress || isTerminal(s.err) {
		mode := modeVerify
		switch {
		case o.TestFile != "":
			mode = modeTestFile
		case o.Tests:
			mode = modeTests
		case o.NoVerify:
			mode = modePlain
		}
		p := newProgress(ctx, s.err, mode)
		p.approving = o.Approval.Approve != agent.ApproveOff
		obs = append(obs, p)
	}
	switch o.Events {
	case "":
	case "-":
		obs = append(obs, agent.NewJSONLines(s.out))
	default:
		f, err := os.OpenFile(o.Events, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			return nil, nil, usagef("--events: %w", err)
		}
		obs = append(obs, agent.NewJSONLines(f))
		closeFn = func() { f.Close() }
	}
	return agent.Observers(obs...), closeFn, nil
}
