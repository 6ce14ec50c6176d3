package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/codeagent/codeagent/safety"
)

// Approval modes of Config.Approve.
const (
	ApproveOff       = ""           // nothing is asked: the model's code runs when the checker and the reviewer pass it
	ApproveAlways    = "always"     // a person approves each execution
	ApproveOnFinding = "on-finding" // a person is asked only when the checker or the reviewer raised something
)

// Decisions of an approval.
const (
	DecisionApprove = "approve" // run it (Decision.Code, when set, instead)
	DecisionReject  = "reject"  // do not run it; the reason goes to the model
	DecisionStop    = "stop"    // end the run
	DecisionExpired = "expired" // nobody decided in time: a rejection
)

// ApprovalRequest is what a person is shown before an execution: the
// code, what the checker and the reviewer said, and what it may reach.
type ApprovalRequest struct {
	// ID names the approval within the run ("1", "2", ...).
	ID      string `json:"approval_id"`
	Attempt int    `json:"attempt"`
	Step    int    `json:"step,omitempty"`
	Phase   string `json:"phase"`
	// Tool is the tool call's name in tool mode (execute_python, ...).
	Tool     string `json:"tool,omitempty"`
	Language string `json:"language"`
	// Code is what would run, byte for byte but for the secrets codeagent
	// knows, masked in place (Redactor.Code); CodeSHA256 is the sha256 of
	// what would run, unmasked.
	Code       string           `json:"code"`
	CodeSHA256 string           `json:"code_sha256"`
	Findings   []safety.Finding `json:"findings"`
	// Warnings are the lines of the code that hold text shaped like a
	// secret (SecretWarnings): shown as written, never hidden.
	Warnings []safety.Finding `json:"warnings,omitempty"`
	// Concerns are the reviewer model's, when one reviewed the code.
	Concerns []string `json:"concerns,omitempty"`
	// Network are the hosts the program may reach, as the user allowed
	// them; Packages what it declares to install.
	Network  []string `json:"network"`
	Packages []string `json:"packages"`
	// AskHosts and AskPackages are what the code asks for beyond what the
	// user allowed: approving grants them, for this run only.
	AskHosts    []string `json:"ask_hosts,omitempty"`
	AskPackages []string `json:"ask_packages,omitempty"`
	// Writes are the files the task names, which the program should write.
	Writes []string `json:"writes,omitempty"`
}

// Decision is a person's answer to an ApprovalRequest.
type Decision struct {
	Decision string `json:"decision"`
	Reason   string `json:"reason,omitempty"`
	// Code, when set, is the person's edit, run instead of the model's.
	Code string `json:"code,omitempty"`
	// Rest approves the executions left in the run without asking; what
	// a program asks beyond the user's permissions is still asked.
	Rest bool `json:"rest,omitempty"`
	// By names who decided: "cli", an API key's name, "mcp-client".
	By string `json:"by"`
}

// Approver asks a person whether code may run. Approve blocks until the
// decision; an error (ctx ended, the person cannot be asked) ends the
// run. The request was emitted as an approval_required event just before,
// so that a door that waits for the decision elsewhere (an HTTP POST)
// can register it from its observer first.
type Approver interface {
	Approve(ctx context.Context, req ApprovalRequest) (Decision, error)
}

// ApproverFunc adapts a function to Approver.
type ApproverFunc func(ctx context.Context, req ApprovalRequest) (Decision, error)

// Approve implements Approver.
func (f ApproverFunc) Approve(ctx context.Context, req ApprovalRequest) (Decision, error) {
	return f(ctx, req)
}

// ApprovalRecord is an approval's outcome, in the approval event and the
// audit log: the hashes of the code asked about and of the person's edit,
// the edit (what ran instead, masked as ApprovalRequest.Code is), and what
// it granted.
type ApprovalRecord struct {
	ID         string   `json:"approval_id"`
	Decision   string   `json:"decision"`
	Reason     string   `json:"reason,omitempty"`
	By         string   `json:"by"`
	CodeSHA256 string   `json:"code_sha256"`
	EditSHA256 string   `json:"edited_sha256,omitempty"`
	Edited     string   `json:"edited_code,omitempty"`
	Rest       bool     `json:"rest,omitempty"`
	Hosts      []string `json:"granted_hosts,omitempty"`
	Packages   []string `json:"granted_packages,omitempty"`
}

// ValidApprove reports whether mode is one of the approval modes.
func ValidApprove(mode string) bool {
	return mode == ApproveOff || mode == ApproveAlways || mode == ApproveOnFinding
}

// gate is one execution on its way to the sandbox.
type gate struct {
	n, step  int
	phase    string
	tool     string
	lang     string
	code     string // as it would run
	findings []safety.Finding
	declares bool // program mode: the code's header may ask for hosts and packages
}

// gateVerdict is what gate decided: run (code, possibly edited) or not, and
// why not, for the model.
type gateVerdict struct {
	run    bool
	code   string
	edited bool
	why    string
	class  ErrorClass
}

// approving reports whether a person is asked about executions.
func (r *run) approving() bool {
	return r.a.cfg.Approve != ApproveOff && r.a.deps.Approver != nil
}

// gate decides whether g's code runs: the hosts and packages it asks for
// beyond the user's permissions, the reviewer's verdict, and a person's
// decision when one is asked. Without approval, a request beyond the
// permissions and a reviewer's rejection are refused with the reason;
// with it, a person decides, and an approval grants what was asked for
// this run only. A person's stop ends the run (*StoppedError).
func (r *run) gate(ctx context.Context, g gate) (gateVerdict, error) {
	v := gateVerdict{run: true, code: g.code}
	var hosts, pkgs []string
	if g.declares {
		hosts = declaredHosts(g.code)
		if g.lang == "python" {
			pkgs = declared(g.code)
		}
	}
	askHosts, why := r.hostsAsked(hosts)
	if why != "" {
		return gateVerdict{why: why, class: ClassSafety}, nil
	}
	askPkgs := r.packagesAsked(pkgs)
	var rev *Review
	if r.a.deps.Reviewer != nil && (len(g.findings) == 0 || r.approving()) {
		rv, err := r.review(ctx, g)
		if err != nil {
			return gateVerdict{}, err
		}
		rev = &rv
	}
	warnings := SecretWarnings(g.code)
	raised := len(g.findings) > 0 || len(warnings) > 0 || (rev != nil && (!rev.Approve || len(rev.Concerns) > 0))
	if !r.approving() {
		switch {
		case len(askHosts) > 0:
			return gateVerdict{why: fmt.Sprintf("the program asks to reach %s, which the user did not allow; programs get only the network the user's flags and manifest give (%s), so do without it",
				strings.Join(askHosts, ", "), orNone(r.networkAllow())), class: ClassSafety}, nil
		case rev != nil && !rev.Approve:
			return gateVerdict{why: "a reviewer rejected the program: " + strings.Join(rev.Concerns, "; "), class: ClassRejected}, nil
		}
		return v, nil
	}
	// After "approve the rest" only what the program asks beyond its
	// permissions is asked.
	ask := (!r.approvedRest && (r.a.cfg.Approve == ApproveAlways || raised)) || len(askHosts) > 0 || len(askPkgs) > 0
	if !ask {
		return v, nil
	}
	r.approvals++
	req := ApprovalRequest{ID: fmt.Sprint(r.approvals), Attempt: g.n, Step: g.step, Phase: g.phase, Tool: g.tool,
		Language: g.lang, Code: r.a.redact.Code(g.code), CodeSHA256: sha(g.code), Findings: g.findings, Warnings: warnings,
		Network: r.networkAllow(), Packages: pkgs, AskHosts: askHosts, AskPackages: askPkgs, Writes: r.deliver}
	if req.Findings == nil {
		req.Findings = []safety.Finding{}
	}
	if rev != nil {
		req.Concerns = rev.Concerns
		if !rev.Approve && len(rev.Concerns) == 0 {
			req.Concerns = []string{"the reviewer rejected the program without saying why"}
		}
	}
	r.emit(Event{Type: EventApprovalRequired, Attempt: g.n, Phase: g.phase, Step: g.step, Tool: g.tool, Approval: &req})
	d, err := r.a.deps.Approver.Approve(ctx, req)
	if err != nil {
		if ctx.Err() != nil {
			return gateVerdict{}, ctx.Err()
		}
		return gateVerdict{}, fmt.Errorf("approval: %w", err)
	}
	rec := ApprovalRecord{ID: req.ID, Decision: d.Decision, Reason: r.a.redact.String(cutRunes(d.Reason, 2000)), By: d.By,
		CodeSHA256: req.CodeSHA256}
	if d.Decision == DecisionApprove && d.Code != "" && d.Code != req.Code {
		v.code, v.edited = d.Code, true
		rec.EditSHA256, rec.Edited = sha(d.Code), r.a.redact.Code(d.Code)
		if g.declares { // the person wrote what the edit asks for
			h, _ := r.hostsAsked(declaredHosts(d.Code))
			askHosts = h
			if g.lang == "python" {
				askPkgs = r.packagesAsked(declared(d.Code))
			}
		}
	}
	if d.Decision == DecisionApprove {
		rec.Rest = d.Rest
		rec.Hosts, rec.Packages = askHosts, askPkgs
	}
	r.emit(Event{Type: EventApproval, Attempt: g.n, Phase: g.phase, Step: g.step, Tool: g.tool, Decision: &rec})
	reason := rec.Reason
	if reason == "" {
		reason = "no reason given"
	}
	switch d.Decision {
	case DecisionApprove:
		r.approvedRest = r.approvedRest || d.Rest
		r.grantHosts(askHosts)
		r.grantPackages(askPkgs)
		return v, nil
	case DecisionStop:
		return gateVerdict{}, &StoppedError{By: d.By, Reason: rec.Reason}
	case DecisionExpired:
		return gateVerdict{why: "nobody approved the program in time, so it did not run", class: ClassRejected}, nil
	case DecisionReject:
		why := "the person supervising this run rejected the program: " + reason
		if len(g.findings) > 0 {
			why += ". The static checker had found: " + findingList(g.findings)
		}
		if len(req.Concerns) > 0 {
			why += ". A reviewer had raised: " + strings.Join(req.Concerns, "; ")
		}
		return gateVerdict{why: why, class: ClassRejected}, nil
	}
	return gateVerdict{}, fmt.Errorf("approval: unknown decision %q", d.Decision)
}

// gateProgram passes a program attempt's code through gate: the code to
// run (a person's edit, which the model is shown), or ok false with the
// refusal fed back (or the checker's findings, when nobody is asked).
func (r *run) gateProgram(ctx context.Context, n int, code string, findings []safety.Finding, at *Attempt) (string, bool, error) {
	gv, err := r.gate(ctx, gate{n: n, phase: PhaseCode, lang: r.a.lang.Name, code: code, findings: findings, declares: true})
	if err != nil {
		return "", false, err
	}
	if !gv.run {
		at.ErrorClass = gv.class
		d := r.feedbackData(n)
		d["Why"] = gv.why
		r.say(render("rejected.txt", d))
		r.fail(n, gv.class, "not run: "+gv.why)
		return "", false, nil
	}
	if len(findings) > 0 && !r.approving() {
		at.ErrorClass = ClassifyFindings(findings)
		d := r.feedbackData(n)
		d["Findings"] = findings
		r.say(render("safety.txt", d))
		r.fail(n, at.ErrorClass, "rejected by the checker: "+findings[0].Message)
		return "", false, nil
	}
	if gv.edited {
		code = gv.code
		at.Code, at.Source = r.a.redact.Code(code), code
		r.res.Code, r.res.Source = at.Code, code
		fence := r.a.lang.Name
		r.msgs = append(r.msgs, r.user("The person supervising this run edited your program before it ran; this is what runs:\n```"+fence+"\n"+at.Code+"```"))
	}
	return code, true, nil
}

// StoppedError ends a run a person stopped at an approval.
type StoppedError struct{ By, Reason string }

func (e *StoppedError) Error() string {
	s := "stopped by " + e.By
	if e.Reason != "" {
		s += ": " + e.Reason
	}
	return s
}

func findingList(fs []safety.Finding) string {
	parts := make([]string, len(fs))
	for i, f := range fs {
		parts[i] = fmt.Sprintf("line %d: %s [%s]", f.Line, f.Message, f.Rule)
	}
	return strings.Join(parts, "; ")
}

func orNone(hosts []string) string {
	if len(hosts) == 0 {
		return "none"
	}
	return strings.Join(hosts, ", ")
}

func sha(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}
