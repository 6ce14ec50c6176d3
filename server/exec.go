package server

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/codeagent/codeagent/internal/lazyre"
	"github.com/codeagent/codeagent/lang"
	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/session"
	"github.com/codeagent/codeagent/workspace"
)

// Bounds of a /v1/exec request besides its body size.
const (
	maxExecFiles = 100
	maxExecEnv   = 64
)

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

var envName = lazyre.New(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)

// programLanguage is the language of a program to run, which must not
// be empty.
func programLanguage(language, code string) (lang.Language, error) {
	l, err := lang.Lookup(language)
	if err != nil {
		return l, badRequest("%v", err)
	}
	if strings.TrimSpace(code) == "" {
		return l, badRequest("code is required")
	}
	return l, nil
}

// handleExec runs one program in a fresh temporary workspace holding the
// request's files and answers with the `exec --json` result object.
func (s *Server) handleExec(w http.ResponseWriter, r *http.Request) {
	var req execRequest
	if err := decodeJSON(w, r, s.cfg.MaxExecBody, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	l, err := programLanguage(req.Language, req.Code)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if len(req.Files) > maxExecFiles || len(req.Env) > maxExecEnv {
		s.writeError(w, r, badRequest("at most %d files and %d environment variables", maxExecFiles, maxExecEnv))
		return
	}
	env := map[string]string{}
	for k, v := range l.Env {
		env[k] = v
	}
	for k, v := range req.Env {
		if !envName.MatchString(k) || strings.ContainsRune(v, 0) {
			s.writeError(w, r, badRequest("invalid environment variable %q", k))
			return
		}
		env[k] = v
	}
	for name := range req.Files {
		if !workspace.ValidName(name) {
			s.writeError(w, r, badRequest("invalid file name %q: plain letters, digits, '.', '_', '-', '+' or spaces, no directories", name))
			return
		}
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
	prog := "/code/main" + l.Ext
	spec := sandbox.Spec{Command: l.Command(prog), Workspace: dir, Files: []sandbox.File{{Path: prog, Data: []byte(req.Code)}},
		Env: env, Stdin: strings.NewReader(req.Stdin), Limits: limits, Network: network}
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
