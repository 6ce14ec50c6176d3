package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/codeagent/codeagent/agent"
	"github.com/codeagent/codeagent/store"
	"net/http"
)

// Runs this process does not have in its registry (finished and pruned,
// from before a restart, or of a process that died) are served from the
// store: their turn holds the status, the result and the events.

// storedRun returns the caller's run named in the path from the store,
// with its events.
func (s *Server) storedRun(r *http.Request) (runJSON, []json.RawMessage, error) {
	id := r.PathValue("id")
	if !sessionID.MatchString(id) {
		return runJSON{}, nil, notFound("run")
	}
	t, err := s.deps.Store.TurnByID(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		return runJSON{}, nil, notFound("run")
	}
	if err != nil {
		return runJSON{}, nil, err
	}
	if _, err := s.deps.Store.OwnedSession(r.Context(), ownerOf(r.Context()), t.SessionID); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return runJSON{}, nil, notFound("run")
		}
		return runJSON{}, nil, err
	}
	events, err := s.deps.Store.RunEvents(r.Context(), id)
	if err != nil {
		return runJSON{}, nil, err
	}
	v := runJSON{ID: t.ID, SessionID: t.SessionID, Task: t.Task, StartedAt: t.StartedAt.UTC(), Status: runStatus(t.Status)}
	if !t.FinishedAt.IsZero() {
		f := t.FinishedAt.UTC()
		v.FinishedAt = &f
	}
	if len(t.Result) > 0 {
		var res agent.Result
		if json.Unmarshal(t.Result, &res) == nil {
			v.Result = &res
		}
	}
	if v.Status != runSucceeded && v.Status != runRunning {
		v.Error = publicMessage(t.Message)
	}
	if len(events) == 0 && v.Status != runRunning {
		// Its process died before storing any: close the stream all the same.
		ok := false
		msg := t.Message
		if msg == "" {
			msg = "the run ended without its events being kept"
		}
		b, _ := json.Marshal(agent.Event{Type: agent.EventDone, Time: t.FinishedAt, Attempt: t.Attempts, Success: &ok, Message: publicMessage(msg)})
		events = []json.RawMessage{b}
	}
	v.Events = len(events)
	return v, events, nil
}

// runStatus is the API status of a turn's status.
func runStatus(turn string) string {
	switch turn {
	case store.TurnSucceeded:
		return runSucceeded
	case store.TurnCanceled:
		return runCanceled
	case store.TurnInterrupted:
		return runInterrupted
	case store.TurnRunning:
		return runRunning
	}
	return runFailed
}

// storedEvents replays a stored run's events after the next-th as
// Server-Sent Events and ends. A run still under way in another process
// cannot be followed from here.
func (s *Server) storedEvents(w http.ResponseWriter, r *http.Request, next int) {
	v, events, err := s.storedRun(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if v.Status == runRunning {
		s.writeError(w, r, conflict("the run is under way in another codeagent process: follow it there"))
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	for i := next; i < len(events); i++ {
		var e struct {
			Type string `json:"type"`
		}
		_ = json.Unmarshal(events[i], &e)
		if _, err := fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", i+1, e.Type, events[i]); err != nil {
			return
		}
	}
	_ = http.NewResponseController(w).Flush()
}
