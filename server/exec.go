package server

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/codeagent/codeagent/app"
	"github.com/codeagent/codeagent/session"
	"github.com/codeagent/codeagent/workspace"
)

// maxExecFiles bounds the files of a /v1/exec request.
const maxExecFiles = 100

// execRequest is the body of POST /v1/exec.
type execRequest struct {
	Language string                     `json:"language"`
	Code     string                     `json:"code"`
	Files    map[string]string          `json:"files"`
	Stdin    string                     `json:"stdin"`
	Env      map[string]string          `json:"env"`
	Limits   map[string]json.RawMessage `json:"limits"`
	Network  *networkRequest            `json:"network"`
}

// handleExec runs one program in a fresh temporary workspace holding the
// request's files and answers with the `exec --json` result object.
func (s *Server) handleExec(w http.ResponseWriter, r *http.Request) {
	var req execRequest
	if err := decodeJSON(w, r, s.cfg.MaxExecBody, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	l, err := app.ProgramLanguage(req.Language, req.Code)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if len(req.Files) > maxExecFiles {
		s.writeError(w, r, badRequest("at most %d files", maxExecFiles))
		return
	}
	if err := app.CheckEnv(req.Env); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := app.CheckFileNames(req.Files); err != nil {
		s.writeError(w, r, err)
		return
	}
	limits, err := s.limits(req.Limits)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	network, err := s.network(req.Network)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := s.beginExec(); err != nil {
		s.writeError(w, r, err)
		return
	}
	defer s.endExec()
	tmp, err := workspace.TempDir()
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	ws, err := workspace.NewTemp(tmp, execPrefix)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer ws.Close()
	dir := ws.Dir
	for name, data := range req.Files {
		if err := ws.WriteFile(name, []byte(data)); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	spec := app.Program{Lang: l, Code: []byte(req.Code), Stdin: strings.NewReader(req.Stdin), Env: req.Env,
		Limits: limits, Network: network}.Spec(dir)
	// Like every run, a one-shot execution is in the audit log before it
	// starts (session.Audited); it belongs to no session, so its records
	// name the key that asked for it.
	rec := session.NewRecorder(r.Context(), s.deps.Store, "", "", "exec-"+session.NewRunID(), s.log)
	if err := rec.Audit("exec_request", map[string]any{"key": ownerOf(r.Context()), "language": l.Name}); err != nil {
		s.writeError(w, r, &session.AuditError{Err: err})
		return
	}
	res, err := session.Audited(s.executions.Sandbox("exec", true), rec).Run(r.Context(), spec)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, res.JSON())
}
