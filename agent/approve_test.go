package agent

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/codeagent/codeagent/llm"
	"github.com/codeagent/codeagent/llm/llmtest"
	"github.com/codeagent/codeagent/llm/providers"
	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/workspace"
)

// scriptedPerson decides approvals in order, recording what it was asked.
type scriptedPerson struct {
	mu        sync.Mutex
	decisions []Decision
	asked     []ApprovalRequest
}

func (p *scriptedPerson) Approve(_ context.Context, req ApprovalRequest) (Decision, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.asked = append(p.asked, req)
	if len(p.asked) > len(p.decisions) {
		return Decision{}, fmt.Errorf("asked %d times, scripted %d", len(p.asked), len(p.decisions))
	}
	d := p.decisions[len(p.asked)-1]
	d.By = "test"
	return d, nil
}

// approvalSetup is setup with a person and, when review is not nil, a
// reviewer model answering review.
func approvalSetup(t *testing.T, cfg Config, person Approver, review []llmtest.Reply, replies ...llmtest.Reply) (*Agent, *llmtest.Server, *workspace.Workspace, *[]Event) {
	t.Helper()
	var reviewer llm.Provider
	if review != nil {
		rs := llmtest.NewOpenAIServer(t, review...)
		var err error
		if reviewer, err = providers.New(llmtest.Config(llm.ProviderOpenAI, rs.BaseURL), nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	return setupWith(t, wires[0], cfg, nil, func(d *Deps) { d.Approver, d.Reviewer = person, reviewer }, replies...)
}

func TestRejectedWithAReasonThenApproved(t *testing.T) {
	person := &scriptedPerson{decisions: []Decision{{Decision: DecisionReject, Reason: "print it in capitals"}, {Decision: DecisionApprove}}}
	a, srv, ws, events := approvalSetup(t, Config{Approve: ApproveAlways}, person, nil,
		py("print('hello')\n"), py("print('HELLO')\n"))
	res, err := a.Run(context.Background(), Task{Prompt: "say hello", Workspace: ws})
	if err != nil || !res.Success || strings.TrimSpace(res.Output) != "HELLO" {
		t.Fatalf("success %v output %q err %v", res.Success, res.Output, err)
	}
	if len(person.asked) != 2 || person.asked[0].Code != "print('hello')\n" {
		t.Fatalf("asked %+v", person.asked)
	}
	if got := sent(srv.Requests()[1]); !strings.Contains(got, "print it in capitals") {
		t.Errorf("the reason did not reach the model: %s", got)
	}
	if res.History[0].Result != nil || res.History[0].ErrorClass != ClassRejected {
		t.Errorf("the rejected program ran, or was not classed rejected: %+v", res.History[0])
	}
	var decided []string
	for _, e := range *events {
		if e.Type == EventApproval {
			decided = append(decided, e.Decision.Decision+" by "+e.Decision.By)
		}
	}
	if strings.Join(decided, ",") != "reject by test,approve by test" {
		t.Errorf("approval events: %v", decided)
	}
}

func TestAnEditRunsInsteadAndRestStopsAsking(t *testing.T) {
	person := &scriptedPerson{decisions: []Decision{{Decision: DecisionApprove, Code: "print('edited')\nraise SystemExit(3)\n", Rest: true}}}
	a, srv, ws, events := approvalSetup(t, Config{Approve: ApproveAlways}, person, nil,
		py("print('original')\n"), py("print('second')\n"))
	res, err := a.Run(context.Background(), Task{Prompt: "say something", Workspace: ws})
	if err != nil || !res.Success || strings.TrimSpace(res.Output) != "second" {
		t.Fatalf("success %v output %q err %v", res.Success, res.Output, err)
	}
	if len(person.asked) != 1 {
		t.Errorf("asked %d times after approving the rest", len(person.asked))
	}
	if r := res.History[0].Result; r == nil || !strings.Contains(r.Stdout, "edited") || r.ExitCode != 3 {
		t.Errorf("the edit did not run: %+v", r)
	}
	if got := sent(srv.Requests()[1]); !strings.Contains(got, "edited your program") {
		t.Errorf("the model was not told of the edit: %s", got)
	}
	for _, e := range *events {
		if e.Type == EventApproval && (e.Decision.EditSHA256 == "" || e.Decision.EditSHA256 == e.Decision.CodeSHA256) {
			t.Errorf("the edit's hash is not recorded: %+v", e.Decision)
		}
	}
}

func TestStopEndsTheRunUnrun(t *testing.T) {
	person := &scriptedPerson{decisions: []Decision{{Decision: DecisionStop, Reason: "enough"}}}
	a, _, ws, _ := approvalSetup(t, Config{Approve: ApproveAlways}, person, nil, py("open('x.txt','w').write('x')\n"))
	res, err := a.Run(context.Background(), Task{Prompt: "write x", Workspace: ws})
	if err != nil || res.Success || !res.Stopped || !strings.Contains(res.Message, "enough") {
		t.Fatalf("%+v %v", res, err)
	}
	if len(res.Artifacts) != 0 || res.History[0].Result != nil {
		t.Errorf("a stopped program ran: %+v", res.History[0])
	}
}

func TestOnFindingAsksOnlyWhenSomethingWasRaised(t *testing.T) {
	person := &scriptedPerson{decisions: []Decision{{Decision: DecisionApprove}}}
	a, _, ws, _ := approvalSetup(t, Config{Approve: ApproveOnFinding, MaxIterations: 2}, person, nil,
		py("import subprocess\nprint('flagged but approved')\n"))
	res, err := a.Run(context.Background(), Task{Prompt: "print", Workspace: ws})
	if err != nil || !res.Success || len(person.asked) != 1 || len(person.asked[0].Findings) == 0 {
		t.Fatalf("success %v asked %+v err %v", res.Success, person.asked, err)
	}
	person = &scriptedPerson{}
	a, _, ws, _ = approvalSetup(t, Config{Approve: ApproveOnFinding}, person, nil, py("print('clean')\n"))
	if res, err := a.Run(context.Background(), Task{Prompt: "print", Workspace: ws}); err != nil || !res.Success || len(person.asked) != 0 {
		t.Fatalf("a clean program: success %v asked %d err %v", res.Success, len(person.asked), err)
	}
}

// Text shaped like a secret in a program is a warning: with on-finding a
// person is asked and shown it with the whole code; without approval the
// program runs, and the check's event carries the warning.
func TestTextLikeASecretIsAWarningShownWhole(t *testing.T) {
	const prog = "# -----BEGIN PRIVATE KEY-----\nprint('shown')\n"
	person := &scriptedPerson{decisions: []Decision{{Decision: DecisionApprove}}}
	a, _, ws, _ := approvalSetup(t, Config{Approve: ApproveOnFinding}, person, nil, py(prog))
	res, err := a.Run(context.Background(), Task{Prompt: "print", Workspace: ws})
	if err != nil || !res.Success || len(person.asked) != 1 {
		t.Fatalf("success %v asked %d err %v", res.Success, len(person.asked), err)
	}
	req := person.asked[0]
	if req.Code != prog || req.CodeSHA256 != sha(prog) || len(req.Warnings) != 1 || req.Warnings[0].Line != 1 || len(req.Findings) != 0 {
		t.Errorf("asked %+v", req)
	}
	a, _, ws, events := approvalSetup(t, Config{}, nil, nil, py(prog))
	if res, err := a.Run(context.Background(), Task{Prompt: "print", Workspace: ws}); err != nil || !res.Success || res.Code != prog {
		t.Fatalf("without approval: success %v code %q err %v", res.Success, res.Code, err)
	}
	for _, e := range *events {
		if e.Type == EventChecked && (len(e.Findings) != 1 || e.Findings[0].Rule != RuleSecretLike || e.Safe == nil || !*e.Safe) {
			t.Errorf("checked: %+v", e)
		}
	}
}

func TestTheReviewersRejectionReachesTheModel(t *testing.T) {
	review := []llmtest.Reply{
		llmtest.Say(`{"approve": false, "concerns": ["it deletes files the task does not name"]}`),
		llmtest.Say(`{"approve": true, "concerns": []}`),
	}
	a, srv, ws, events := approvalSetup(t, Config{}, nil, review,
		py("print('cleanup')\n"), py("print('fine')\n"))
	res, err := a.Run(context.Background(), Task{Prompt: "print fine", Workspace: ws})
	if err != nil || !res.Success || res.History[0].Result != nil {
		t.Fatalf("success %v history %+v err %v", res.Success, res.History, err)
	}
	if got := sent(srv.Requests()[1]); !strings.Contains(got, "it deletes files the task does not name") {
		t.Errorf("the concern did not reach the model: %s", got)
	}
	n := 0
	for _, e := range *events {
		if e.Type == EventReviewed {
			n++
		}
	}
	if n != 2 {
		t.Errorf("%d reviewed events, want 2", n)
	}
}

// A program asking for a host the user did not allow is refused without
// approval, and with it runs reaching that host, for this run only.
func TestAHostIsGrantedOnlyByAPerson(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "secret-of-the-host") }))
	t.Cleanup(func() { ln.Close() })
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	host := "fetch.test:" + port
	// The user allows another host; names resolve to the loopback server.
	nw := &sandbox.Network{Allow: []string{"other.test"}, Resolve: map[string]string{"fetch.test": ln.Addr().String()}}
	prog := "# network: " + host + "\nimport urllib.request\nprint(urllib.request.urlopen('http://" + host + "/').read().decode())\n"

	a, srv, ws, _ := approvalSetup(t, Config{MaxIterations: 1, Network: nw}, nil, nil, py(prog))
	res, err := a.Run(context.Background(), Task{Prompt: "fetch it", Workspace: ws})
	if err != nil || res.Success || res.History[0].Result != nil || !strings.Contains(res.Message, "did not allow") {
		t.Fatalf("without approval: success %v message %q err %v", res.Success, res.Message, err)
	}
	_ = srv
	person := &scriptedPerson{decisions: []Decision{{Decision: DecisionApprove}, {Decision: DecisionStop}}}
	a, _, ws, _ = approvalSetup(t, Config{Approve: ApproveOnFinding, Network: nw}, person, nil, py(prog), py(prog))
	res, err = a.Run(context.Background(), Task{Prompt: "fetch it", Workspace: ws})
	if err != nil || !res.Success || !strings.Contains(res.Output, "secret-of-the-host") {
		t.Fatalf("with approval: success %v output %q message %q err %v history %+v", res.Success, res.Output, res.Message, err, res.History[0].Result)
	}
	if len(person.asked) != 1 || strings.Join(person.asked[0].AskHosts, ",") != host {
		t.Errorf("asked %+v", person.asked)
	}
	// The grant was for that run: the next one asks again.
	ws2, err := workspace.New(filepath.Join(t.TempDir(), "ws2"))
	if err != nil {
		t.Fatal(err)
	}
	if res, err := a.Run(context.Background(), Task{Prompt: "fetch it", Workspace: ws2}); err != nil || !res.Stopped || len(person.asked) != 2 {
		t.Errorf("a second run: stopped %v, asked %d times, err %v", res.Stopped, len(person.asked), err)
	}
}

// In tool mode each execute call is shown before it runs: a rejected cell
// never runs and the model gets the reason as the call's error; an edited
// one runs as edited.
func TestToolCallsAreApprovedOneByOne(t *testing.T) {
	person := &scriptedPerson{decisions: []Decision{
		{Decision: DecisionReject, Reason: "no files, please"},
		{Decision: DecisionApprove, Code: "x = 5\nprint('x is', x)\n"},
	}}
	a, srv, ws, _ := approvalSetup(t, Config{Mode: ModeTools, Approve: ApproveAlways, Tools: map[string]sandbox.Limits{"execute_python": {}}}, person, nil,
		calls(pyCall("open('f.txt', 'w').write('x')\n")),
		calls(pyCall("x = 2\nprint('x is', x)\n")),
		llmtest.Say("x is 5."))
	res, err := a.Run(context.Background(), Task{Prompt: "print x", Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	st := steps(res)
	if len(st) != 2 || !st[0].Refused || st[0].Result != nil || st[0].ErrorClass != ClassRejected {
		t.Fatalf("steps %+v", st)
	}
	if !strings.Contains(st[0].Output, "no files, please") || !strings.Contains(st[1].Output, "x is 5") {
		t.Errorf("outputs %q / %q", st[0].Output, st[1].Output)
	}
	if person.asked[0].Tool != "execute_python" || person.asked[0].Step != 1 {
		t.Errorf("asked %+v", person.asked[0])
	}
	if got := sent(srv.Requests()[1]); !strings.Contains(got, "no files, please") {
		t.Errorf("the reason did not reach the model")
	}
	if _, err := os.Stat(filepath.Join(ws.Dir, "f.txt")); err == nil {
		t.Errorf("the rejected cell ran")
	}
}

// "Approve the rest" stops the asking about programs and findings, not
// about a host a later program asks for.
func TestRestStillAsksForAHost(t *testing.T) {
	person := &scriptedPerson{decisions: []Decision{{Decision: DecisionApprove, Rest: true}, {Decision: DecisionReject, Reason: "no network"}}}
	a, _, ws, _ := approvalSetup(t, Config{Approve: ApproveAlways, MaxIterations: 3}, person, nil,
		py("raise SystemExit(1)\n"),
		py("import subprocess\nraise SystemExit(1)\n"),
		py("# network: example.com\nprint('x')\n"))
	res, err := a.Run(context.Background(), Task{Prompt: "print x", Workspace: ws})
	if err != nil || res.Success {
		t.Fatalf("success %v err %v", res.Success, err)
	}
	if len(person.asked) != 2 || strings.Join(person.asked[1].AskHosts, ",") != "example.com" {
		t.Fatalf("asked %+v", person.asked)
	}
	if res.History[1].Result == nil || res.History[2].Result != nil {
		t.Errorf("the second program (a finding, after approving the rest) should have run, the third (a host, rejected) not")
	}
}
