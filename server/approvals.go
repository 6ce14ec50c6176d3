package server

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/codeagent/codeagent/agent"
	"net/http"
	"strings"
	"sync"
	"time"
)

// A run started with "approve" stops before each execution (see
// agent.Config.Approve): the agent emits an approval_required event, which
// the run's observer registers here before any stream shows it, then
// waits in Approve for POST /v1/runs/{id}/approvals/{approval_id}. An
// approval nobody decides within Config.ApprovalTimeout is a rejection
// (decision "expired"); one pending when the run ends ends with it.

// byExpiry is Decision.By of an approval that expired.
const byExpiry = "server (approval timeout)"

// approvals are a run's approvals: each one asked, with the channel its
// decision is sent on (buffered: a decision may come before the agent
// waits for it), and what became of those no longer pending.
type approvals struct {
	timeout time.Duration
	mu      sync.Mutex
	asked   map[string]chan agent.Decision
	ended   map[string]string // approval ID -> what became of it, for a 409
}

func newApprovals(timeout time.Duration) *approvals {
	return &approvals{timeout: timeout, asked: map[string]chan agent.Decision{}, ended: map[string]string{}}
}

// open registers a pending approval; the run's observer calls it on the
// approval_required event, before the event is shown.
func (a *approvals) open(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.asked[id] == nil {
		a.asked[id] = make(chan agent.Decision, 1)
	}
}

// close ends a pending approval with what, and reports whether it was
// still pending (the decision, the expiry and the run's end race; the
// first wins).
func (a *approvals) close(id, what string) (chan agent.Decision, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	ch := a.asked[id]
	if ch == nil {
		return nil, false
	}
	if _, done := a.ended[id]; done {
		return nil, false
	}
	a.ended[id] = what
	return ch, true
}

// endAll ends the approvals still pending when the run ends: deciding
// them then is a conflict, not a decision nobody reads.
func (a *approvals) endAll() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for id := range a.asked {
		if _, done := a.ended[id]; !done {
			a.ended[id] = "the run ended"
		}
	}
}

// decide sends d to the pending approval id: a not-found error for an
// approval the run never asked, a conflict for one decided or ended.
func (a *approvals) decide(id string, d agent.Decision) error {
	what := d.Decision + " by " + d.By
	if ch, ok := a.close(id, what); ok {
		ch <- d
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if done, ok := a.ended[id]; ok {
		return conflict("approval %s is no longer pending: %s", id, done)
	}
	return notFound("approval")
}

// Approve implements agent.Approver: it waits for the decision posted
// for req, the timeout (a rejection, "expired") or the run's end.
func (a *approvals) Approve(ctx context.Context, req agent.ApprovalRequest) (agent.Decision, error) {
	a.mu.Lock()
	ch := a.asked[req.ID]
	a.mu.Unlock()
	if ch == nil {
		return agent.Decision{}, errors.New("approval " + req.ID + " was not registered by the run's observer")
	}
	timer := time.NewTimer(a.timeout)
	defer timer.Stop()
	select {
	case d := <-ch:
		return d, nil
	case <-timer.C:
		if _, ok := a.close(req.ID, "expired after "+a.timeout.String()); ok {
			return agent.Decision{Decision: agent.DecisionExpired, By: byExpiry}, nil
		}
	case <-ctx.Done():
		if _, ok := a.close(req.ID, "the run ended"); ok {
			return agent.Decision{}, ctx.Err()
		}
	}
	return <-ch, nil // decided just before the timeout or the end: the decision holds
}

// approveMode reads a run request's "approve": true (always), false or
// absent (off), or a mode name ("always", "on-finding").
func approveMode(raw json.RawMessage) (string, error) {
	s := strings.TrimSpace(string(raw))
	switch s {
	case "", "null", "false":
		return agent.ApproveOff, nil
	case "true":
		return agent.ApproveAlways, nil
	}
	var mode string
	if json.Unmarshal(raw, &mode) == nil && (mode == agent.ApproveAlways || mode == agent.ApproveOnFinding) {
		return mode, nil
	}
	return "", badRequest("approve %s: want true, false, \"always\" or \"on-finding\"", cutText(s, 40))
}

// maxModelName bounds a request's review_model.
const maxModelName = 200

// reviewModel checks a run request's review_model: a model's name only,
// asked at the server's reviewer endpoint (Deps.Review), never a URL
// of the request's choosing.
func (s *Server) reviewModel(name string) error {
	switch {
	case name == "":
		return nil
	case len(name) > maxModelName || strings.ContainsFunc(name, func(r rune) bool { return r < ' ' || r == 0x7f }):
		return badRequest("review_model: a model name of at most %d characters, without control characters", maxModelName)
	case s.deps.Review == nil:
		return badRequest("review_model: this server has no model endpoint to review with (serve --review-base-url, or a main model)")
	}
	return nil
}

// decisionRequest is the body of POST /v1/runs/{id}/approvals/{approval_id}.
type decisionRequest struct {
	Decision string `json:"decision"`
	Reason   string `json:"reason"`
	Code     string `json:"code"`
	Rest     bool   `json:"rest"`
}

// decisionJSON is the answer: the decision as it was sent to the run.
type decisionJSON struct {
	RunID      string `json:"run_id"`
	ApprovalID string `json:"approval_id"`
	Decision   string `json:"decision"`
	Reason     string `json:"reason,omitempty"`
	Edited     bool   `json:"edited"`
	Rest       bool   `json:"rest,omitempty"`
	By         string `json:"by"`
}

// maxReason bounds a decision's reason (the agent keeps 2000 characters).
const maxReason = 8 << 10

// handleDecide decides a pending approval of the caller's run; the
// decision is signed with the caller's key name.
func (s *Server) handleDecide(w http.ResponseWriter, r *http.Request) {
	var req decisionRequest
	if err := decodeJSON(w, r, s.cfg.MaxBody, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	switch {
	case req.Decision != agent.DecisionApprove && req.Decision != agent.DecisionReject && req.Decision != agent.DecisionStop:
		s.writeError(w, r, badRequest("decision %q: want approve, reject or stop", cutText(req.Decision, 40)))
		return
	case req.Decision != agent.DecisionApprove && (req.Code != "" || req.Rest):
		s.writeError(w, r, badRequest("code and rest go with decision approve"))
		return
	case len(req.Reason) > maxReason:
		s.writeError(w, r, badRequest("the reason is longer than %d bytes", maxReason))
		return
	}
	run, err := s.ownRun(r)
	if errors.Is(err, errNotLive) {
		if _, _, err = s.storedRun(r); err == nil {
			err = conflict("the run is not under way in this server: its approvals ended with it")
		}
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	id := r.PathValue("approval_id")
	d := agent.Decision{Decision: req.Decision, Reason: req.Reason, Code: req.Code, Rest: req.Rest, By: ownerOf(r.Context())}
	if err := run.approvals.decide(id, d); err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, decisionJSON{RunID: run.ID, ApprovalID: id, Decision: d.Decision, Reason: d.Reason,
		Edited: d.Code != "", Rest: d.Rest, By: d.By})
}

// cutText is s cut to n bytes, for error messages that quote a request.
func cutText(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
