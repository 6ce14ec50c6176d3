package mcpserver

import (
	"context"
	"fmt"
	"github.com/codeagent/codeagent/agent"
	"strings"
	"unicode"

	"github.com/codeagent/codeagent/termtext"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mrtrProtocol is the first MCP protocol version in which a server may
// not send a request (elicitation/create) while it serves a call: it must
// return the request in the call's result instead (multi round-trip,
// SEP-2322), which would leave run_task's run waiting between calls.
const mrtrProtocol = "2026-07-28"

// approveMode decodes run_task's approve: "" (or "false") asks nobody,
// "always" (or "true") asks before each execution, "on-finding" only when
// the checker or a reviewer raised something or a program asks for more
// than it was given.
func approveMode(v string) (string, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "", "false":
		return agent.ApproveOff, nil
	case "always", "true":
		return agent.ApproveAlways, nil
	case "on-finding":
		return agent.ApproveOnFinding, nil
	}
	return "", argError("approve %q: want always (or true), on-finding, or none", cutRunes(v, 40))
}

// elicitApprover is the Approver of a run_task with approve: it asks the
// client of ss by MCP elicitation (form mode) and blocks until it
// answers. It refuses, before anything runs, a client that does not
// declare form elicitation, or one whose protocol version forbids asking
// during the call, so that approve never runs silently unasked.
func (s *Server) elicitApprover(ss *mcp.ServerSession) (agent.Approver, error) {
	ip := ss.InitializeParams()
	if ip == nil || ip.Capabilities == nil || ip.Capabilities.Elicitation == nil {
		return nil, argError("approve needs a client that supports MCP elicitation (form); this client does not declare it")
	}
	if el := ip.Capabilities.Elicitation; el.Form == nil && el.URL != nil {
		return nil, argError("approve needs a client that supports MCP elicitation in form mode; this client declares only url mode")
	}
	if ip.ProtocolVersion >= mrtrProtocol {
		return nil, argError("approve asks by MCP elicitation during the call, which protocol %s allows only as multi round-trip "+
			"results, which codeagent does not offer yet: connect with protocol version 2025-11-25 or earlier", ip.ProtocolVersion)
	}
	by := "mcp-client"
	if ci := ip.ClientInfo; ci != nil {
		if name := printable(ci.Name, 64); name != "" {
			by += ":" + name
		}
	}
	e := &elicitor{ss: ss, by: by, schema: approvalSchema(s.cfg.MaxCode)}
	return e, nil
}

// elicitor asks an MCP client to approve executions.
type elicitor struct {
	ss     *mcp.ServerSession
	by     string
	schema map[string]any
}

// Approve implements agent.Approver: the client's accept is the decision
// in its form (approve when it gives none), decline a rejection, cancel a
// stop.
func (e *elicitor) Approve(ctx context.Context, req agent.ApprovalRequest) (agent.Decision, error) {
	res, err := e.ss.Elicit(ctx, &mcp.ElicitParams{Mode: "form", Message: approvalMessage(req), RequestedSchema: e.schema})
	if err != nil {
		return agent.Decision{}, fmt.Errorf("asking the MCP client: %w", err)
	}
	str := func(k string) string { v, _ := res.Content[k].(string); return v }
	d := agent.Decision{By: e.by, Reason: strings.TrimSpace(str("reason"))}
	switch res.Action {
	case "accept":
		d.Decision = str("decision")
		if d.Decision == "" {
			d.Decision = agent.DecisionApprove
		}
		if d.Decision == agent.DecisionApprove {
			d.Code = str("code")
			d.Rest, _ = res.Content["rest"].(bool)
		}
	case "decline":
		d.Decision = agent.DecisionReject
		if d.Reason == "" {
			d.Reason = "declined by the MCP client"
		}
	case "cancel":
		d.Decision = agent.DecisionStop
		if d.Reason == "" {
			d.Reason = "cancelled by the MCP client"
		}
	default:
		return agent.Decision{}, fmt.Errorf("the MCP client answered the approval with action %q", cutRunes(res.Action, 40))
	}
	return d, nil
}

// approvalSchema is the form a person answers: the decision, a reason for
// the model, an edit of the code and whether to approve the rest.
func approvalSchema(maxCode int64) map[string]any {
	return map[string]any{
		"type": "object",
		"properties": map[string]any{
			"decision": map[string]any{"type": "string", "title": "Decision", "enum": []string{
				agent.DecisionApprove, agent.DecisionReject, agent.DecisionStop},
				"description": "approve runs the program; reject does not, and the reason goes to the model; stop ends the run"},
			"reason": map[string]any{"type": "string", "title": "Reason", "maxLength": 2000,
				"description": "optional: why, for the model (on reject) and the audit log"},
			"code": map[string]any{"type": "string", "title": "Edited code", "maxLength": maxCode,
				"description": "optional, with approve: a program to run instead of the one shown"},
			"rest": map[string]any{"type": "boolean", "title": "Approve the rest",
				"description": "with approve: run the rest of this run's programs without asking (hosts or packages beyond those allowed are still asked)"},
		},
		"required": []string{"decision"},
	}
}

// approvalMessage is what the person reads: the attempt, the code whole
// (what the person approves is what runs: a program padded past any cut
// would hide its end), what the checker and the reviewer raised and what
// the program asks for. The code sits in a fence longer than any run of
// backticks in it, so that it cannot close the fence and have a client
// render the rest as markup (an HTML comment hides text); characters a
// terminal acts on and bidirectional controls, which reorder what is
// shown, are shown escaped (termtext), as the CLI's approver shows them.
func approvalMessage(req agent.ApprovalRequest) string {
	var b strings.Builder
	at := fmt.Sprintf("attempt %d", req.Attempt)
	if req.Phase == agent.PhaseTests {
		at += " (tests)"
	}
	if req.Step > 0 {
		at += fmt.Sprintf(", step %d", req.Step)
	}
	if req.Tool != "" {
		at += ", " + req.Tool
	}
	fmt.Fprintf(&b, "codeagent asks before running %s code (approval %s, %s).\n\n", req.Language, req.ID, at)
	code := termtext.Text(req.Code)
	if code != req.Code {
		b.WriteString("Characters a terminal acts on, bidirectional controls and bytes that are not UTF-8 are shown escaped (\\x1b, \\u202e, \\xff).\n\n")
	}
	fence := strings.Repeat("`", max(3, longestRun(code, '`')+1))
	fmt.Fprintf(&b, "%s%s\n%s\n%s\n", fence, req.Language, strings.TrimRight(code, "\n"), fence)
	if len(req.Findings) > 0 {
		b.WriteString("\nThe static checker found:\n")
		for _, f := range req.Findings {
			fmt.Fprintf(&b, "- line %d: %s [%s]\n", f.Line, f.Message, f.Rule)
		}
	}
	if len(req.Warnings) > 0 {
		b.WriteString("\nWarnings (shown as written):\n")
		for _, w := range req.Warnings {
			fmt.Fprintf(&b, "- line %d: %s\n", w.Line, w.Message)
		}
	}
	list := func(title string, items []string) {
		if len(items) > 0 {
			fmt.Fprintf(&b, "\n%s: %s\n", title, strings.Join(items, ", "))
		}
	}
	if len(req.Concerns) > 0 {
		b.WriteString("\nA reviewer raised:\n")
		for _, c := range req.Concerns {
			fmt.Fprintf(&b, "- %s\n", c)
		}
	}
	list("It asks to reach, beyond what was allowed (approving grants them for this run)", req.AskHosts)
	list("It asks to install, beyond what was allowed (approving grants them for this run)", req.AskPackages)
	list("Hosts it may reach", req.Network)
	list("Packages it declares", req.Packages)
	list("Files the task names", req.Writes)
	b.WriteString("\nApprove to run it (or give edited code to run instead), reject to tell the model why not, or stop to end the run.")
	return b.String()
}

// printable is s without control characters, cut to n runes.
func printable(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return -1
		}
		return r
	}, s)
	return cutRunes(strings.TrimSpace(s), n)
}

// cutRunes is s cut to at most n runes.
func cutRunes(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n])
	}
	return s
}

// longestRun is the length of the longest run of c in s.
func longestRun(s string, c byte) int {
	best, n := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] != c {
			n = 0
			continue
		}
		n++
		best = max(best, n)
	}
	return best
}
