package server

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/codeagent/codeagent/agent"
	"github.com/codeagent/codeagent/llm/llmtest"
)

// liveEvents follows a run's event stream while the run goes on.
type liveEvents struct {
	t  *testing.T
	ch chan sseEvent
}

// follow opens a run's event stream; next reads it.
func (ts *testServer) follow(t *testing.T, token, runID string) *liveEvents {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", ts.URL+"/v1/runs/"+runID+"/events", nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		t.Fatalf("events: status %d", resp.StatusCode)
	}
	l := &liveEvents{t: t, ch: make(chan sseEvent, 256)}
	go func() {
		defer close(l.ch)
		defer resp.Body.Close()
		var cur sseEvent
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 8<<20)
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "" && cur.Name != "":
				l.ch <- cur
				cur = sseEvent{}
			case strings.HasPrefix(line, "event: "):
				cur.Name = line[7:]
			case strings.HasPrefix(line, "data: "):
				if json.Unmarshal([]byte(line[6:]), &cur.Event) != nil {
					return
				}
			}
		}
	}()
	return l
}

// next skips to the next event of type typ; the stream ending first (or
// a done event, unless asked for) fails the test.
func (l *liveEvents) next(typ agent.EventType) agent.Event {
	l.t.Helper()
	for e := range l.ch {
		if e.Event.Type == typ {
			return e.Event
		}
		if e.Event.Type == agent.EventDone {
			l.t.Fatalf("the run ended before a %s event: %s", typ, e.Event.Message)
		}
	}
	l.t.Fatalf("the stream ended before a %s event", typ)
	return agent.Event{}
}

// decide posts a decision on a run's approval as token's key.
func (ts *testServer) decide(t *testing.T, token, runID, id string, body map[string]any, want int) map[string]any {
	t.Helper()
	var out map[string]any
	ts.json(t, "POST", "/v1/runs/"+runID+"/approvals/"+id, token, body, want, &out)
	return out
}

// approvalRecords are the data of the audit log's approval records.
func approvalRecords(t *testing.T, ts *testServer) []map[string]any {
	t.Helper()
	recs, err := ts.st.AuditLog(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, r := range recs {
		if r.Kind == "approval" {
			var d map[string]any
			if err := json.Unmarshal(r.Data, &d); err != nil {
				t.Fatal(err)
			}
			out = append(out, d)
		}
	}
	return out
}

// TestServeRunApproveRejectThenApprove: a run started with "approve": true
// stops before its first program; alice rejects it with a reason, which
// the model is told, then approves the second program, which runs. The
// audit log names her as the one who decided.
func TestServeRunApproveRejectThenApprove(t *testing.T) {
	ts := newTestServer(t, testOptions{cfg: Config{Keys: twoKeys}, replies: []llmtest.Reply{
		pyReply("print('first greeting')\n"), pyReply("print('second greeting')\n"), llmtest.Say(verifyOK),
	}})
	s := ts.createSession(t, aliceToken, "approvals")
	var run runJSON
	ts.json(t, "POST", "/v1/sessions/"+s.ID+"/runs", aliceToken, map[string]any{"task": "greet", "approve": true}, http.StatusAccepted, &run)
	ev := ts.follow(t, aliceToken, run.ID)

	ask := ev.next(agent.EventApprovalRequired).Approval
	if ask == nil || ask.ID != "1" || ask.Attempt != 1 || !strings.Contains(ask.Code, "first greeting") || ask.Findings == nil {
		t.Fatalf("first approval: %+v", ask)
	}
	const reason = "greet with the second greeting instead"
	got := ts.decide(t, aliceToken, run.ID, "1", map[string]any{"decision": "reject", "reason": reason}, http.StatusOK)
	if got["decision"] != "reject" || got["by"] != "alice" || got["approval_id"] != "1" {
		t.Errorf("answer: %v", got)
	}
	if d := ev.next(agent.EventApproval).Decision; d == nil || d.Decision != agent.DecisionReject || d.By != "alice" || d.Reason != reason {
		t.Fatalf("the rejection: %+v", d)
	}
	ask = ev.next(agent.EventApprovalRequired).Approval
	if ask == nil || ask.ID != "2" || !strings.Contains(ask.Code, "second greeting") {
		t.Fatalf("second approval: %+v", ask)
	}
	if reqs := ts.model.Requests(); len(reqs) != 2 || !strings.Contains(reqs[1].Text(), reason) {
		t.Fatalf("the model's second request lacks the reason (%d requests)", len(reqs))
	}
	ts.decide(t, aliceToken, run.ID, "2", map[string]any{"decision": "approve"}, http.StatusOK)
	if x := ev.next(agent.EventExecuted); x.Result == nil || x.Result.Stdout != "second greeting\n" {
		t.Fatalf("executed: %+v", x.Result)
	}
	if r := ts.waitRun(t, aliceToken, run.ID); r.Status != runSucceeded || r.Result.Attempts != 2 {
		t.Fatalf("run: %+v", r)
	}
	recs := approvalRecords(t, ts)
	if len(recs) != 2 || recs[0]["decision"] != "reject" || recs[0]["by"] != "alice" || recs[0]["reason"] != reason ||
		recs[1]["decision"] != "approve" || recs[1]["by"] != "alice" {
		t.Fatalf("audit approval records: %v", recs)
	}
}

// TestServeRunApproveShowsWhatRuns: a program hiding a line between
// private-key markers and holding the server's local token is shown
// through the API's approval whole, but for the token, masked in place;
// the hash is of what runs; the person's edit (which hides a line the same
// way) is what runs, and what the approval event and the audit log hold.
func TestServeRunApproveShowsWhatRuns(t *testing.T) {
	prog := "# -----BEGIN PRIVATE KEY-----\nprint('HIDDEN')\n# -----END PRIVATE KEY-----\nTOKEN = '" + testLocalToken + "'\n"
	const edit = "# -----BEGIN PRIVATE KEY-----\nprint('EDIT-HIDDEN')\n# -----END PRIVATE KEY-----\n"
	ts := newTestServer(t, testOptions{cfg: Config{LocalToken: testLocalToken}, replies: []llmtest.Reply{pyReply(prog), llmtest.Say(verifyOK)}})
	s := ts.createSession(t, testLocalToken, "shown")
	var run runJSON
	ts.json(t, "POST", "/v1/sessions/"+s.ID+"/runs", testLocalToken, map[string]any{"task": "print", "approve": true, "max_iterations": 1},
		http.StatusAccepted, &run)
	ev := ts.follow(t, testLocalToken, run.ID)
	ask := ev.next(agent.EventApprovalRequired).Approval
	sum := sha256.Sum256([]byte(prog))
	if want := strings.ReplaceAll(prog, testLocalToken, agent.Redacted); ask == nil || ask.Code != want ||
		ask.CodeSHA256 != hex.EncodeToString(sum[:]) || len(ask.Warnings) != 1 || ask.Warnings[0].Line != 1 {
		t.Fatalf("approval: %+v, want the code %q and its hash", ask, want)
	}
	ts.decide(t, testLocalToken, run.ID, "1", map[string]any{"decision": "approve", "code": edit}, http.StatusOK)
	if d := ev.next(agent.EventApproval).Decision; d == nil || d.Edited != edit {
		t.Fatalf("the decision: %+v", d)
	}
	if x := ev.next(agent.EventExecuted); x.Result == nil || x.Result.Stdout != "EDIT-HIDDEN\n" {
		t.Fatalf("executed: %+v", x.Result)
	}
	if r := ts.waitRun(t, testLocalToken, run.ID); r.Status != runSucceeded {
		t.Fatalf("run: %+v", r)
	}
	sum = sha256.Sum256([]byte(edit))
	if recs := approvalRecords(t, ts); len(recs) != 1 || recs[0]["edited_code"] != edit || recs[0]["edited_sha256"] != hex.EncodeToString(sum[:]) {
		t.Fatalf("audit approval records: %v", recs)
	}
}

// TestServeRunApprovalExpires: an approval nobody decides within the
// server's approval timeout is a rejection, "expired", and the program
// does not run.
func TestServeRunApprovalExpires(t *testing.T) {
	ts := newTestServer(t, testOptions{cfg: Config{ApprovalTimeout: time.Second}, replies: []llmtest.Reply{
		pyReply("print('never')\n"),
	}})
	s := ts.createSession(t, "", "expiry")
	var run runJSON
	ts.json(t, "POST", "/v1/sessions/"+s.ID+"/runs", "", map[string]any{"task": "print", "approve": "always", "max_iterations": 1},
		http.StatusAccepted, &run)
	ev := ts.follow(t, "", run.ID)
	ev.next(agent.EventApprovalRequired)
	start := time.Now()
	d := ev.next(agent.EventApproval).Decision
	if d == nil || d.Decision != agent.DecisionExpired || d.By != byExpiry {
		t.Fatalf("decision: %+v", d)
	}
	if waited := time.Since(start); waited > 10*time.Second {
		t.Errorf("expired after %s", waited)
	}
	r := ts.waitRun(t, "", run.ID)
	if r.Status != runFailed || len(r.Result.History) != 1 || r.Result.History[0].Result != nil {
		t.Fatalf("run: %+v", r)
	}
	for _, e := range ts.events(t, "", run.ID, "") {
		if e.Event.Type == agent.EventExecuted {
			t.Fatal("the program ran")
		}
	}
	ts.decide(t, "", run.ID, "1", map[string]any{"decision": "approve"}, http.StatusConflict)
}

// TestServeRunApproveEditedCode: approving with edited code runs the edit,
// not the model's program, and the audit record has the edit's hash.
func TestServeRunApproveEditedCode(t *testing.T) {
	ts := newTestServer(t, testOptions{replies: []llmtest.Reply{pyReply("print('from the model')\n"), llmtest.Say(verifyOK)}})
	s := ts.createSession(t, "", "edit")
	var run runJSON
	ts.json(t, "POST", "/v1/sessions/"+s.ID+"/runs", "", map[string]any{"task": "print", "approve": true}, http.StatusAccepted, &run)
	ev := ts.follow(t, "", run.ID)
	ev.next(agent.EventApprovalRequired)
	got := ts.decide(t, "", run.ID, "1", map[string]any{"decision": "approve", "code": "print('edited by a person')\n"}, http.StatusOK)
	if got["edited"] != true || got["by"] != Anonymous {
		t.Errorf("answer: %v", got)
	}
	if x := ev.next(agent.EventExecuted); x.Result == nil || x.Result.Stdout != "edited by a person\n" {
		t.Fatalf("executed: %+v", x.Result)
	}
	if r := ts.waitRun(t, "", run.ID); r.Status != runSucceeded {
		t.Fatalf("run: %+v", r)
	}
	if recs := approvalRecords(t, ts); len(recs) != 1 || recs[0]["edited_sha256"] == "" || recs[0]["by"] != Anonymous {
		t.Fatalf("audit: %v", recs)
	}
}

// TestServeRunApprovalErrors: what the approvals endpoint and the run
// request refuse, and a stop that ends the run.
func TestServeRunApprovalErrors(t *testing.T) {
	ts := newTestServer(t, testOptions{cfg: Config{Keys: twoKeys}, replies: []llmtest.Reply{pyReply("print(1)\n")}})
	s := ts.createSession(t, aliceToken, "errors")
	start := func(body map[string]any, want int) runJSON {
		t.Helper()
		var run runJSON
		var out any = &run
		if want != http.StatusAccepted {
			out = nil
		}
		ts.json(t, "POST", "/v1/sessions/"+s.ID+"/runs", aliceToken, body, want, out)
		return run
	}
	for _, v := range []any{"sometimes", 1, "", map[string]any{}, "off"} {
		start(map[string]any{"task": "x", "approve": v}, http.StatusBadRequest)
	}
	start(map[string]any{"task": "x", "review_model": "bad\nname"}, http.StatusBadRequest)
	run := start(map[string]any{"task": "print", "approve": "on-finding", "max_iterations": 1, "verify": false}, http.StatusAccepted)
	ts.waitRun(t, aliceToken, run.ID) // print(1) has no finding: nobody is asked
	if recs := approvalRecords(t, ts); len(recs) != 0 {
		t.Fatalf("on-finding asked about a clean program: %v", recs)
	}

	ts.model.Push(pyReply("print(2)\n"))
	run = start(map[string]any{"task": "print", "approve": true}, http.StatusAccepted)
	ev := ts.follow(t, aliceToken, run.ID)
	ev.next(agent.EventApprovalRequired)
	path := "/v1/runs/" + run.ID + "/approvals/"
	for _, c := range []struct {
		token, id string
		body      map[string]any
		want      int
	}{
		{aliceToken, "99", map[string]any{"decision": "approve"}, http.StatusNotFound},
		{bobToken, "1", map[string]any{"decision": "approve"}, http.StatusNotFound},
		{aliceToken, "1", map[string]any{"decision": "maybe"}, http.StatusBadRequest},
		{aliceToken, "1", map[string]any{"decision": "reject", "code": "print(3)"}, http.StatusBadRequest},
		{aliceToken, "1", map[string]any{"decision": "approve", "extra": 1}, http.StatusBadRequest},
		{"", "1", map[string]any{"decision": "approve"}, http.StatusUnauthorized},
	} {
		resp, b := ts.do(t, "POST", path+c.id, c.token, strings.NewReader(mustJSON(c.body)), "Content-Type", "application/json")
		if resp.StatusCode != c.want || !strings.Contains(string(b), `"error"`) {
			t.Errorf("%s %v as %q: %d %s, want %d", c.id, c.body, c.token, resp.StatusCode, b, c.want)
		}
	}
	ts.decide(t, aliceToken, run.ID, "1", map[string]any{"decision": "stop", "reason": "enough"}, http.StatusOK)
	out := ts.decide(t, aliceToken, run.ID, "1", map[string]any{"decision": "approve"}, http.StatusConflict)
	if msg, _ := out["error"].(map[string]any)["message"].(string); !strings.Contains(msg, "no longer pending: stop by alice") {
		t.Errorf("second decision: %v", out)
	}
	r := ts.waitRun(t, aliceToken, run.ID)
	if r.Status != runFailed || r.Result == nil || !r.Result.Stopped || !strings.Contains(r.Result.Message, "stopped by alice: enough") {
		t.Fatalf("stopped run: %+v", r)
	}
}

// TestServeRunApprovalEndsWithRun: canceling a run that waits for a
// decision ends the wait and the run; the approval is then gone (409).
func TestServeRunApprovalEndsWithRun(t *testing.T) {
	ts := newTestServer(t, testOptions{replies: []llmtest.Reply{pyReply("print(1)\n")}})
	s := ts.createSession(t, "", "cancel")
	var run runJSON
	ts.json(t, "POST", "/v1/sessions/"+s.ID+"/runs", "", map[string]any{"task": "print", "approve": true}, http.StatusAccepted, &run)
	ts.follow(t, "", run.ID).next(agent.EventApprovalRequired)
	ts.json(t, "POST", "/v1/runs/"+run.ID+"/cancel", "", nil, http.StatusAccepted, nil)
	if r := ts.waitRun(t, "", run.ID); r.Status != runCanceled {
		t.Fatalf("run: %+v", r)
	}
	ts.decide(t, "", run.ID, "1", map[string]any{"decision": "approve"}, http.StatusConflict)
}

// TestServeRunReviewModel: a server with a reviewer endpoint reviews a
// run that names a review model, with that model at the server's
// endpoint; the reviewer's concern reaches the main model, whose next
// program the reviewer passes.
func TestServeRunReviewModel(t *testing.T) {
	const concern = "it prints the wrong greeting"
	ts := newTestServer(t, testOptions{
		replies: []llmtest.Reply{pyReply("print('bye')\n"), pyReply("print('hello')\n"), llmtest.Say(verifyOK)},
		review: []llmtest.Reply{llmtest.Say(`{"approve": false, "concerns": ["` + concern + `"]}`),
			llmtest.Say(`{"approve": true, "concerns": []}`)},
	})
	s := ts.createSession(t, "", "review")
	var run runJSON
	ts.json(t, "POST", "/v1/sessions/"+s.ID+"/runs", "", map[string]any{"task": "print hello", "review_model": "picked-reviewer"},
		http.StatusAccepted, &run)
	r := ts.waitRun(t, "", run.ID)
	if r.Status != runSucceeded || r.Result.Attempts != 2 {
		t.Fatalf("run: %+v", r)
	}
	reqs := ts.model.Requests()
	if len(reqs) < 2 || !strings.Contains(reqs[1].Text(), concern) {
		t.Fatalf("the main model's second request lacks the reviewer's concern (%d requests)", len(reqs))
	}
	rev := ts.reviewer.Requests()
	if len(rev) != 2 || rev[0].Model() != "picked-reviewer" || !strings.Contains(rev[1].Text(), "print('hello')") {
		t.Fatalf("reviewer requests: %d, model %q", len(rev), rev[0].Model())
	}
	var reviewed int
	for _, e := range ts.events(t, "", run.ID, "") {
		if e.Event.Type == agent.EventReviewed {
			reviewed++
		}
	}
	if reviewed != 2 {
		t.Errorf("reviewed events: %d", reviewed)
	}
}

// TestApprovalsDecisionBeforeWait: a client that sees approval_required
// may decide before the agent waits (the event is shown first); the
// decision is kept for the wait. Deciding twice, an approval never asked,
// the timeout and the run's end are answered as the API says.
func TestApprovalsDecisionBeforeWait(t *testing.T) {
	a := newApprovals(time.Minute)
	a.open("1")
	if err := a.decide("1", agent.Decision{Decision: agent.DecisionApprove, By: "alice"}); err != nil {
		t.Fatal(err)
	}
	d, err := a.Approve(context.Background(), agent.ApprovalRequest{ID: "1"})
	if err != nil || d.Decision != agent.DecisionApprove || d.By != "alice" {
		t.Fatalf("decision: %+v, %v", d, err)
	}
	if err := a.decide("1", agent.Decision{Decision: agent.DecisionReject}); classify(err).Status != http.StatusConflict {
		t.Errorf("twice: %v", err)
	}
	if err := a.decide("2", agent.Decision{Decision: agent.DecisionReject}); classify(err).Status != http.StatusNotFound {
		t.Errorf("never asked: %v", err)
	}
	short := newApprovals(10 * time.Millisecond)
	short.open("1")
	if d, err := short.Approve(context.Background(), agent.ApprovalRequest{ID: "1"}); err != nil || d.Decision != agent.DecisionExpired {
		t.Errorf("timeout: %+v, %v", d, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	a.open("3")
	if _, err := a.Approve(ctx, agent.ApprovalRequest{ID: "3"}); err == nil {
		t.Error("a canceled run's approval did not end")
	}
	a.open("4")
	a.endAll()
	if err := a.decide("4", agent.Decision{Decision: agent.DecisionApprove}); classify(err).Status != http.StatusConflict {
		t.Errorf("after the run: %v", err)
	}
}

// TestServeRunApprovalHostsWithinCeiling: a host a program asks for is
// put to the person only within the server's egress ceiling; one beyond
// it is refused without asking, and the model is told why.
func TestServeRunApprovalHostsWithinCeiling(t *testing.T) {
	ts := newTestServer(t, testOptions{cfg: Config{EgressCeiling: []string{"allowed.example"}}, replies: []llmtest.Reply{
		pyReply("# network: beyond.example\nprint(1)\n"), pyReply("# network: allowed.example\nprint(2)\n"),
	}})
	s := ts.createSession(t, "", "hosts")
	var run runJSON
	ts.json(t, "POST", "/v1/sessions/"+s.ID+"/runs", "", map[string]any{"task": "fetch", "approve": true, "max_iterations": 2},
		http.StatusAccepted, &run)
	ev := ts.follow(t, "", run.ID)
	ask := ev.next(agent.EventApprovalRequired).Approval
	if ask == nil || ask.ID != "1" || ask.Attempt != 2 || strings.Join(ask.AskHosts, ",") != "allowed.example" {
		t.Fatalf("approval: %+v", ask)
	}
	if reqs := ts.model.Requests(); len(reqs) != 2 || !strings.Contains(reqs[1].Text(), "beyond.example, which no one can allow here") {
		t.Fatalf("the model was not told why beyond.example was refused (%d requests)", len(reqs))
	}
	ts.decide(t, "", run.ID, "1", map[string]any{"decision": "stop"}, http.StatusOK)
	if r := ts.waitRun(t, "", run.ID); r.Result == nil || !r.Result.Stopped {
		t.Fatalf("run: %+v", r)
	}
}
