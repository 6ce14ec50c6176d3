package server

import (
	"context"
	"errors"
	"fmt"
	"github.com/codeagent/codeagent/internal/lazyre"
	"github.com/codeagent/codeagent/kernel"
	"github.com/codeagent/codeagent/store"
	"net/http"
	"os"
	"path"
	"time"
)

// sessionJSON is a session as the API shows it.
type sessionJSON struct {
	ID        string       `json:"id"`
	Name      string       `json:"name"`
	CreatedAt time.Time    `json:"created_at"`
	UpdatedAt time.Time    `json:"updated_at"`
	Turns     int          `json:"turns"`
	ActiveRun string       `json:"active_run,omitempty"`
	History   []store.Turn `json:"history,omitempty"`
	// Kernel is the session's kernel (alive, memory), when it had one.
	Kernel *kernel.Status `json:"kernel,omitempty"`
}

func (s *Server) sessionView(o store.OwnedSession) sessionJSON {
	return sessionJSON{ID: o.ID, Name: o.Label, CreatedAt: o.CreatedAt, UpdatedAt: o.UpdatedAt, Turns: o.Turns,
		ActiveRun: s.runs.activeIn(o.ID)}
}

var (
	sessionLabel = lazyre.New(`^[A-Za-z0-9][A-Za-z0-9._ -]{0,63}$`)
	sessionID    = lazyre.New(`^[0-9a-f]{24}$`)
)

// session returns the caller's session named in the path; another key's
// session is not found, exactly like a missing one.
func (s *Server) session(r *http.Request) (store.OwnedSession, error) {
	id := r.PathValue("id")
	if !sessionID.MatchString(id) {
		return store.OwnedSession{}, notFound("session")
	}
	o, err := s.deps.Store.OwnedSession(r.Context(), ownerOf(r.Context()), id)
	if errors.Is(err, store.ErrNotFound) {
		return o, notFound("session")
	}
	return o, err
}

func (s *Server) handleCreateSession(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Name string `json:"name"`
	}
	if r.ContentLength != 0 {
		if err := decodeJSON(w, r, s.cfg.MaxBody, &req); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	named := req.Name != ""
	if !named {
		req.Name = "session-" + time.Now().UTC().Format("20060102-150405.000")
	}
	if !sessionLabel.MatchString(req.Name) {
		s.writeError(w, r, badRequest("invalid session name %q: letters, digits, spaces, '.', '_' and '-', at most 64", req.Name))
		return
	}
	owner := ownerOf(r.Context())
	dir := func(id string) string { return s.workspaceDir(owner, id) }
	o, err := s.deps.Store.CreateOwnedSession(r.Context(), owner, req.Name, dir)
	// A name of the server's choosing is unique even for two sessions made
	// in the same millisecond.
	for n := 2; !named && errors.Is(err, store.ErrExists) && n <= 100; n++ {
		o, err = s.deps.Store.CreateOwnedSession(r.Context(), owner, fmt.Sprintf("%s-%d", req.Name, n), dir)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if _, err := s.sessionWorkspace(owner, o.ID); err != nil {
		_ = s.deps.Store.DeleteOwnedSession(context.WithoutCancel(r.Context()), owner, o.ID)
		s.writeError(w, r, fmt.Errorf("create workspace: %w", err))
		return
	}
	w.Header().Set("Location", "/v1/sessions/"+o.ID)
	writeJSON(w, http.StatusCreated, s.sessionView(o))
}

func (s *Server) handleListSessions(w http.ResponseWriter, r *http.Request) {
	list, err := s.deps.Store.OwnedSessions(r.Context(), ownerOf(r.Context()))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := make([]sessionJSON, len(list))
	for i, o := range list {
		out[i] = s.sessionView(o)
	}
	writeJSON(w, http.StatusOK, map[string]any{"sessions": out})
}

func (s *Server) handleGetSession(w http.ResponseWriter, r *http.Request) {
	o, err := s.session(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	turns, err := s.deps.Store.Turns(r.Context(), o.ID)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	v := s.sessionView(o)
	v.History = turns
	v.Kernel = s.kernelView(o.Owner, o.ID)
	writeJSON(w, http.StatusOK, v)
}

// handleDeleteSession cancels the session's run, if any, and removes its
// records and workspace. Audit records stay.
func (s *Server) handleDeleteSession(w http.ResponseWriter, r *http.Request) {
	o, err := s.session(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if id := s.runs.activeIn(o.ID); id != "" {
		if run := s.runs.get(id); run != nil {
			run.cancel()
			select {
			case <-run.done:
			case <-r.Context().Done():
				s.writeError(w, r, conflict("the session's run is still stopping; try again"))
				return
			}
		}
	}
	if err := s.deps.Store.DeleteOwnedSession(r.Context(), o.Owner, o.ID); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.kernels.Forget(kernelKey(o.Owner, o.ID))
	// The workspace's parent is the session's own directory, removed
	// through a root at the data directory: never through a link out of it.
	if err := removeBeneath(s.cfg.DataDir, path.Dir(s.workspaceRel(o.Owner, o.ID))); err != nil {
		s.log.Warn("remove session directory", "session", o.ID, "err", err)
	}
	w.WriteHeader(http.StatusNoContent)
}

// removeBeneath removes rel and what it holds beneath dir, never following
// a link out of dir.
func removeBeneath(dir, rel string) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	return root.RemoveAll(rel)
}
