package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"

	"github.com/codeagent/codeagent/agent"
	"github.com/codeagent/codeagent/app"
	"github.com/codeagent/codeagent/lang"
	"github.com/codeagent/codeagent/llm"
	"github.com/codeagent/codeagent/manifest"
	"github.com/codeagent/codeagent/termtext"
)

// approveFlag is --approve: alone it asks before every execution
// (always); --approve=on-finding asks only when the checker or the
// reviewer raised something, or a program asks for more than it was given.
type approveFlag struct{ mode *string }

func (f approveFlag) String() string {
	if f.mode == nil {
		return ""
	}
	return *f.mode
}

func (f approveFlag) Set(s string) error {
	switch s {
	case "true", agent.ApproveAlways:
		*f.mode = agent.ApproveAlways
	case agent.ApproveOnFinding:
		*f.mode = agent.ApproveOnFinding
	case "false":
		*f.mode = agent.ApproveOff
	default:
		return fmt.Errorf("want always or on-finding")
	}
	return nil
}

func (f approveFlag) IsBoolFlag() bool { return true }

// approvalFlags are a run's --approve and reviewer flags.
type approvalFlags struct {
	Approve string
	Review  *reviewFlags
}

func (a *approvalFlags) register(fs *flag.FlagSet) {
	fs.Var(approveFlag{&a.Approve}, "approve", "ask at the terminal before each program runs (=on-finding: only when something was found)")
	a.Review = addReviewFlags(fs)
}

// check refuses --approve without a terminal to ask at.
func (a *approvalFlags) check(s stdio) error {
	if a.Approve != agent.ApproveOff && !(termtext.IsTerminal(s.in) && termtext.IsTerminal(s.err)) {
		return usagef("--approve asks at a terminal, and standard input or error is not one: run it in a terminal, or review programs with --review-model instead")
	}
	return nil
}

// termApprover asks at the terminal before each execution: it shows the
// code (escaped), the checker's findings, the reviewer's concerns and
// what the program may reach, and reads y, n, e, a or q.
type termApprover struct {
	in     io.Reader
	out    io.Writer
	getenv func(string) string
	lines  *lineReader
}

func newTermApprover(s stdio, getenv func(string) string) *termApprover {
	return &termApprover{in: s.in, out: s.err, getenv: getenv, lines: newLineReader(s.in)}
}

// Approve implements agent.Approver.
func (t *termApprover) Approve(ctx context.Context, req agent.ApprovalRequest) (agent.Decision, error) {
	t.show(req)
	code := req.Code
	for {
		fmt.Fprint(t.out, "run it? [y]es, [n]o, [e]dit, [a]ll the rest, [q]uit: ")
		answer, err := t.lines.read(ctx)
		if err != nil {
			return agent.Decision{}, err
		}
		switch strings.ToLower(strings.TrimSpace(answer)) {
		case "y", "yes":
			return agent.Decision{Decision: agent.DecisionApprove, Code: edited(code, req.Code), By: "cli"}, nil
		case "a", "all":
			return agent.Decision{Decision: agent.DecisionApprove, Code: edited(code, req.Code), Rest: true, By: "cli"}, nil
		case "n", "no":
			fmt.Fprint(t.out, "why? (told to the model): ")
			reason, err := t.lines.read(ctx)
			if err != nil {
				return agent.Decision{}, err
			}
			return agent.Decision{Decision: agent.DecisionReject, Reason: strings.TrimSpace(reason), By: "cli"}, nil
		case "q", "quit":
			return agent.Decision{Decision: agent.DecisionStop, Reason: "the user quit at the approval", By: "cli"}, nil
		case "e", "edit":
			next, err := t.edit(ctx, code, req.Language)
			if err != nil {
				fmt.Fprintf(t.out, "codeagent: the editor: %v\n", err)
				continue
			}
			if next == code {
				fmt.Fprintln(t.out, "(unchanged)")
				continue
			}
			code = next
			fmt.Fprintln(t.out, "edited; this runs if you approve it:")
			t.showCode(code)
		default:
			fmt.Fprintln(t.out, "answer y, n, e, a or q")
		}
	}
}

// edited is the code to send as an edit: "" when unchanged.
func edited(code, orig string) string {
	if code == orig {
		return ""
	}
	return code
}

func (t *termApprover) show(req agent.ApprovalRequest) {
	what := fmt.Sprintf("attempt %d", req.Attempt)
	if req.Tool != "" {
		what = fmt.Sprintf("tool call %d (%s)", req.Step, req.Tool)
	} else if req.Phase == agent.PhaseTests {
		what = fmt.Sprintf("tests %d", req.Attempt)
	}
	fmt.Fprintf(t.out, "\n── approval %s: %s wants to run this %s program ──\n", req.ID, what, req.Language)
	t.showCode(req.Code)
	for _, f := range req.Findings {
		fmt.Fprintf(t.out, "checker: line %d: %s [%s]\n", f.Line, termtext.Text(f.Message), f.Rule)
	}
	for _, w := range req.Warnings {
		fmt.Fprintf(t.out, "warning: line %d: %s\n", w.Line, termtext.Text(w.Message))
	}
	for _, c := range req.Concerns {
		fmt.Fprintf(t.out, "reviewer: %s\n", termtext.Text(c))
	}
	fmt.Fprintf(t.out, "network: %s\n", termtext.Text(orNothing(req.Network)))
	if len(req.AskHosts) > 0 {
		fmt.Fprintf(t.out, "asks to reach: %s (approving allows it for this run only)\n", termtext.Text(strings.Join(req.AskHosts, ", ")))
	}
	if len(req.Packages) > 0 {
		fmt.Fprintf(t.out, "installs: %s\n", termtext.Text(strings.Join(req.Packages, ", ")))
	}
	if len(req.AskPackages) > 0 {
		fmt.Fprintf(t.out, "not in permissions.install: %s (approving allows them for this run only)\n", termtext.Text(strings.Join(req.AskPackages, ", ")))
	}
	if len(req.Writes) > 0 {
		fmt.Fprintf(t.out, "the task names files to write: %s\n", termtext.Text(strings.Join(req.Writes, ", ")))
	}
}

func (t *termApprover) showCode(code string) {
	lines := strings.Split(strings.TrimSuffix(code, "\n"), "\n")
	for i, l := range lines {
		fmt.Fprintf(t.out, "%4d  %s\n", i+1, termtext.Text(l))
	}
}

func orNothing(hosts []string) string {
	if len(hosts) == 0 {
		return "none"
	}
	return strings.Join(hosts, ", ")
}

// maxEdit bounds what is read back from the editor.
const maxEdit = 1 << 20

// edit opens code in $VISUAL or $EDITOR (vi when neither is set), through
// the shell as git does, and returns the file as the editor left it.
func (t *termApprover) edit(ctx context.Context, code, language string) (string, error) {
	editor := t.getenv("VISUAL")
	if editor == "" {
		editor = t.getenv("EDITOR")
	}
	if editor == "" {
		editor = "vi"
	}
	ext := ""
	if l, err := lang.Lookup(language); err == nil {
		ext = l.Ext
	}
	f, err := os.CreateTemp("", "codeagent-approve-*"+ext)
	if err != nil {
		return "", err
	}
	defer os.Remove(f.Name())
	if _, err := f.WriteString(code); err != nil {
		f.Close()
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, "sh", "-c", editor+` "$@"`, editor, f.Name())
	if in, ok := t.in.(*os.File); ok {
		cmd.Stdin = in
	}
	cmd.Stdout, cmd.Stderr = t.out, t.out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s: %w", editor, err)
	}
	b, err := readSmallFile(f.Name(), maxEdit)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// lineReader reads lines from the terminal one byte at a time, only when
// asked: nothing typed for a later prompt (apply the changes?) is taken,
// and a prompt gives up when ctx ends (Ctrl-C).
type lineReader struct {
	ask   chan struct{}
	lines chan lineOrErr
}

type lineOrErr struct {
	line string
	err  error
}

func newLineReader(in io.Reader) *lineReader {
	l := &lineReader{ask: make(chan struct{}), lines: make(chan lineOrErr, 1)}
	go func() {
		for range l.ask {
			var b strings.Builder
			var one [1]byte
			for {
				n, err := in.Read(one[:])
				if n == 1 && one[0] != '\n' && b.Len() < 64<<10 {
					b.WriteByte(one[0])
				}
				if n == 1 && one[0] == '\n' {
					l.lines <- lineOrErr{line: b.String()}
					break
				}
				if err != nil {
					if errors.Is(err, io.EOF) {
						err = errors.New("the terminal closed while asking for approval")
					}
					l.lines <- lineOrErr{line: b.String(), err: err}
					break
				}
			}
		}
	}()
	return l
}

func (l *lineReader) read(ctx context.Context) (string, error) {
	select {
	case l.ask <- struct{}{}:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	select {
	case r := <-l.lines:
		return r.line, r.err
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// approvalParts are a run's reviewer configuration (the flags, else the
// manifest's agent.review) and its approver at the terminal, each nil
// when not asked for.
func (o *runOptions) approvalParts(m *manifest.Manifest, main llm.Config, s stdio) (*llm.Config, agent.Approver, error) {
	rf := o.Approval.Review
	if rf == nil {
		rf = &reviewFlags{}
	}
	if m != nil && rf.o == (app.ReviewOptions{}) {
		rf = &reviewFlags{o: app.ReviewOptions{Model: m.Agent.Review.Model, BaseURL: m.Agent.Review.BaseURL, Provider: m.Agent.Review.Provider}}
	}
	base, err := rf.resolve(&main, o.Getenv)
	if err != nil {
		return nil, nil, err
	}
	var approver agent.Approver
	if o.Approval.Approve != agent.ApproveOff {
		approver = newTermApprover(s, o.Getenv)
	}
	return app.ReviewFor(base, ""), approver, nil
}
