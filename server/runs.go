package server

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/codeagent/codeagent/agent"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/codeagent/codeagent/app"
	"github.com/codeagent/codeagent/sandbox"
)

// Run statuses.
const (
	runRunning     = "running"
	runSucceeded   = "succeeded"
	runFailed      = "failed"
	runCanceled    = "canceled"
	runInterrupted = "interrupted" // its process died (a crash, kill -9)
)

// Bounds of the run registry: finished runs are kept this long, and at
// most this many.
const (
	keepFinished = time.Hour
	maxFinished  = 1000
	sseHeartbeat = 15 * time.Second
)

// run is one agent run: its events so far (replayed to late subscribers),
// and its result once done. It is an agent.Observer.
type run struct {
	ID, SessionID, Owner, Task string
	Started                    time.Time
	ctx                        context.Context // the run's; its cause says why it was canceled
	cancel                     func()
	done                       chan struct{} // closed after the last event and the result
	approvals                  *approvals    // its approvals, pending and ended (approvals.go)

	mu       sync.Mutex
	events   []agent.Event
	notify   chan struct{} // closed and replaced at each event
	status   string
	result   *agent.Result
	errMsg   string
	finished time.Time
}

// Event implements agent.Observer: it appends and wakes the subscribers.
// The done event of a canceled run says why it was canceled.
func (r *run) Event(e agent.Event) {
	if e.Type == agent.EventDone && r.ctx != nil && r.ctx.Err() != nil {
		e.Message = "canceled: " + context.Cause(r.ctx).Error()
	}
	if e.Type == agent.EventApprovalRequired && e.Approval != nil {
		r.approvals.open(e.Approval.ID) // before any stream shows it
	}
	r.mu.Lock()
	r.events = append(r.events, e)
	close(r.notify)
	r.notify = make(chan struct{})
	r.mu.Unlock()
}

func (r *run) end(status string, res *agent.Result, errMsg string) {
	r.mu.Lock()
	r.status, r.result, r.errMsg, r.finished = status, res, errMsg, time.Now()
	r.mu.Unlock()
	close(r.done)
}

// eventList is a copy of the events so far.
func (r *run) eventList() []agent.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]agent.Event{}, r.events...)
}

// since returns the events from index i and a channel closed at the next.
func (r *run) since(i int) ([]agent.Event, <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if i > len(r.events) {
		i = len(r.events)
	}
	return r.events[i:], r.notify
}

// runJSON is a run as the API shows it.
type runJSON struct {
	ID         string        `json:"id"`
	SessionID  string        `json:"session_id"`
	Task       string        `json:"task"`
	Status     string        `json:"status"`
	StartedAt  time.Time     `json:"started_at"`
	FinishedAt *time.Time    `json:"finished_at,omitempty"`
	Events     int           `json:"events"`
	Result     *agent.Result `json:"result,omitempty"`
	Error      string        `json:"error,omitempty"`
}

func (r *run) view() runJSON {
	r.mu.Lock()
	defer r.mu.Unlock()
	v := runJSON{ID: r.ID, SessionID: r.SessionID, Task: r.Task, Status: r.status, StartedAt: r.Started,
		Events: len(r.events), Result: r.result, Error: r.errMsg}
	if !r.finished.IsZero() {
		f := r.finished
		v.FinishedAt = &f
	}
	return v
}

// runRegistry holds the runs in memory: one active run per session.
type runRegistry struct {
	mu        sync.Mutex
	runs      map[string]*run
	bySession map[string]string // session ID -> active run ID
	wg        sync.WaitGroup
}

func newRunRegistry() *runRegistry {
	return &runRegistry{runs: map[string]*run{}, bySession: map[string]string{}}
}

// reserve takes a session's run slot unless the session has an active run
// or max runs are active; add or unreserve must follow.
func (g *runRegistry) reserve(sessionID string, max int) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if id, ok := g.bySession[sessionID]; ok {
		return conflict("run %s is under way in this session; wait for it or cancel it", id)
	}
	if len(g.bySession) >= max {
		return &app.Error{Class: app.Busy, Code: "too_many_runs",
			Message: fmt.Sprintf("%d runs are under way, the most this server takes", max), RetryAfter: 10 * time.Second}
	}
	g.bySession[sessionID] = "starting"
	g.wg.Add(1)
	return nil
}

// unreserve frees a slot whose run did not start.
func (g *runRegistry) unreserve(sessionID string) {
	g.mu.Lock()
	delete(g.bySession, sessionID)
	g.mu.Unlock()
	g.wg.Done()
}

// add registers a run in its reserved slot.
func (g *runRegistry) add(r *run) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.prune()
	g.runs[r.ID] = r
	g.bySession[r.SessionID] = r.ID
}

// free marks r's session free for its next run: before r's done event
// reaches its streams, so that a client told of the end can start another.
func (g *runRegistry) free(r *run) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.bySession[r.SessionID] == r.ID {
		delete(g.bySession, r.SessionID)
	}
}

// finish frees r's session if free did not, and counts r as ended.
func (g *runRegistry) finish(r *run) {
	g.free(r)
	g.wg.Done()
}

// prune drops finished runs that are old or too many; g.mu is held.
func (g *runRegistry) prune() {
	var fin []*run
	for id, r := range g.runs {
		r.mu.Lock()
		f := r.finished
		r.mu.Unlock()
		if f.IsZero() {
			continue
		}
		if time.Since(f) > keepFinished {
			delete(g.runs, id)
			continue
		}
		fin = append(fin, r)
	}
	for len(fin) >= maxFinished {
		oldest := 0
		for i := range fin {
			if fin[i].finished.Before(fin[oldest].finished) {
				oldest = i
			}
		}
		delete(g.runs, fin[oldest].ID)
		fin = append(fin[:oldest], fin[oldest+1:]...)
	}
}

func (g *runRegistry) get(id string) *run {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.runs[id]
}

func (g *runRegistry) activeIn(sessionID string) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.bySession[sessionID]
}

func (g *runRegistry) active() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.bySession)
}

func (g *runRegistry) wait() { g.wg.Wait() }

// errNotLive says a run is not in this process's registry: it may be in
// the store (finished, or from before a restart).
var errNotLive = errors.New("run not in the registry")

// ownRun returns the caller's run named in the path, if this process has
// it, else errNotLive.
func (s *Server) ownRun(r *http.Request) (*run, error) {
	run := s.runs.get(r.PathValue("id"))
	if run == nil {
		return nil, errNotLive
	}
	if run.Owner != ownerOf(r.Context()) {
		return nil, notFound("run")
	}
	return run, nil
}

// runRequest is the body of POST /v1/sessions/{id}/runs.
type runRequest struct {
	Task          string          `json:"task"`
	Language      string          `json:"language"`
	MaxIterations int             `json:"max_iterations"`
	Verify        *bool           `json:"verify"`
	Network       *networkRequest `json:"network"`
	Mode          string          `json:"mode"`      // program (default), tools or auto
	MaxSteps      int             `json:"max_steps"` // tool calls in tool mode
	// Dependencies are Python or npm packages installed before the first
	// program (docs/DEPENDENCIES.md); program mode only.
	Dependencies *app.DependenciesRequest `json:"dependencies"`
	// Approve is true ("always"), false (off), "always" or "on-finding":
	// a person decides each execution (approvals.go).
	Approve json.RawMessage `json:"approve"`
	// ReviewModel names the reviewer model, asked at the server's
	// reviewer endpoint (never one of the request's choosing).
	ReviewModel string `json:"review_model"`

	net     *sandbox.Network // Network, checked against the server's ceiling
	deps    app.EnvRequest   // Dependencies, checked likewise
	approve string           // Approve, an agent.Approve mode
	run     app.RunRequest   // the run as decoded and validated (checkRun)
}

func (s *Server) handleStartRun(w http.ResponseWriter, r *http.Request) {
	var req runRequest
	if err := decodeJSON(w, r, s.cfg.MaxBody, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := s.checkRun(&req); err != nil {
		s.writeError(w, r, err)
		return
	}
	if s.isDraining() {
		s.writeError(w, r, errDraining)
		return
	}
	o, err := s.session(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	run, err := s.startRun(r.Context(), o, req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Location", "/v1/runs/"+run.ID)
	writeJSON(w, http.StatusAccepted, run.view())
}

// checkRun reads what a run request's fields mean on this server (the
// approval, the network and dependencies within its bounds, the reviewer)
// and validates the run (app.RunRequest.Validate) into req.run, before
// anything runs.
func (s *Server) checkRun(req *runRequest) error {
	var err error
	if req.approve, err = approveMode(req.Approve); err != nil {
		return err
	}
	if req.net, err = s.network(req.Network); err != nil {
		return err
	}
	req.run = app.RunRequest{Task: req.Task, Config: agent.Config{MaxIterations: req.MaxIterations,
		Verify: req.Verify == nil || *req.Verify, Lang: cmp.Or(req.Language, "python"), Network: req.net,
		Mode: req.Mode, MaxSteps: req.MaxSteps, Approve: req.approve}}
	if err := req.run.Validate(); err != nil {
		return err
	}
	if err := s.reviewModel(req.ReviewModel); err != nil {
		return err
	}
	if req.deps, err = app.ClientDependencies(req.Dependencies, req.run.Config.Lang, s.networkBounds()); err != nil {
		return err
	}
	if !req.deps.Empty() {
		if req.Mode == agent.ModeTools {
			return badRequest("mode tools runs Python in the session's kernel, which has no dependencies: use mode program (or auto) with dependencies")
		}
		req.run.Config.Mode = agent.ModeProgram
	}
	return nil
}

func (s *Server) handleGetRun(w http.ResponseWriter, r *http.Request) {
	if run := s.liveRun(w, r, http.StatusOK); run != nil {
		writeJSON(w, http.StatusOK, run.view())
	}
}

func (s *Server) handleCancelRun(w http.ResponseWriter, r *http.Request) {
	// A finished run (or one of another process) cannot be canceled here:
	// liveRun answers with it as it is.
	if run := s.liveRun(w, r, http.StatusAccepted); run != nil {
		run.cancel()
		writeJSON(w, http.StatusAccepted, run.view())
	}
}

// liveRun is the request's run when it is under way in this process;
// otherwise it answers itself, with the stored run (and status) or the
// error, and returns nil.
func (s *Server) liveRun(w http.ResponseWriter, r *http.Request, status int) *run {
	run, err := s.ownRun(r)
	if errors.Is(err, errNotLive) {
		var v runJSON
		if v, _, err = s.storedRun(r); err == nil {
			writeJSON(w, status, v)
			return nil
		}
	}
	if err != nil {
		s.writeError(w, r, err)
		return nil
	}
	return run
}

// handleRunEvents streams a run's events as Server-Sent Events: every event
// so far (or after Last-Event-ID), then each new one as it happens, and
// ends after the done event. Each event's id is its position (1-based),
// its event name the agent's type and its data the agent.Event JSON.
func (s *Server) handleRunEvents(w http.ResponseWriter, r *http.Request) {
	next := 0
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		if n, err := strconv.Atoi(v); err == nil && n > 0 {
			next = n
		}
	}
	run, err := s.ownRun(r)
	if errors.Is(err, errNotLive) {
		s.storedEvents(w, r, next)
		return
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	tick := time.NewTicker(sseHeartbeat)
	defer tick.Stop()
	for {
		evs, changed := run.since(next)
		for _, e := range evs {
			next++
			b, _ := json.Marshal(e)
			if _, err := fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", next, e.Type, b); err != nil {
				return
			}
		}
		if len(evs) > 0 {
			if rc.Flush() != nil {
				return
			}
		}
		select {
		case <-run.done:
			if evs, _ := run.since(next); len(evs) == 0 {
				return
			}
		case <-changed:
		case <-tick.C:
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil || rc.Flush() != nil {
				return
			}
		case <-r.Context().Done():
			return
		}
	}
}
