package server

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/codeagent/codeagent/app"
	"github.com/codeagent/codeagent/lang"
	"github.com/codeagent/codeagent/sandbox"
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
	// Dependencies are Python or npm packages to install first
	// (docs/DEPENDENCIES.md).
	Dependencies *app.DependenciesRequest `json:"dependencies"`
}

// handleExec runs one program in a fresh temporary workspace holding the
// request's files and answers with the `exec --json` result object.
func (s *Server) handleExec(w http.ResponseWriter, r *http.Request) {
	var req execRequest
	if err := decodeJSON(w, r, s.cfg.MaxExecBody, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	l, limits, err := s.program(req.Language, req.Code, req.Env, req.Limits)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if len(req.Files) > maxExecFiles {
		s.writeError(w, r, badRequest("at most %d files", maxExecFiles))
		return
	}
	if err := app.CheckFileNames(req.Files); err != nil {
		s.writeError(w, r, err)
		return
	}
	network, err := s.network(req.Network)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	depReq, err := app.ClientDependencies(req.Dependencies, l.Name, s.networkBounds())
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
	// starts (app.StartExec); it belongs to no session, so its records
	// name the key that asked for it.
	x, err := app.StartExec(r.Context(), app.ExecRequest{Store: s.deps.Store, Sandbox: s.executions.Sandbox("exec", true),
		Audit:  app.AuditRecord{Kind: "exec_request", Data: map[string]any{"key": ownerOf(r.Context()), "language": l.Name}},
		Logger: s.log})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if !depReq.Empty() {
		lease, err := app.EnsureDependencies(r.Context(), s.envs, depReq, x.Rec)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		defer lease.Release()
		lease.Apply(&spec)
	}
	res, err := x.Run(r.Context(), spec)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, res.JSON())
}

// program checks what /v1/exec and a session's exec share: the program's
// language and code, its environment, and its limits within the server's
// range.
func (s *Server) program(language, code string, env map[string]string, limits map[string]json.RawMessage) (lang.Language, sandbox.Limits, error) {
	l, err := app.ProgramLanguage(language, code)
	if err != nil {
		return l, sandbox.Limits{}, err
	}
	if err := app.CheckEnv(env); err != nil {
		return l, sandbox.Limits{}, err
	}
	lim, err := s.limits(limits)
	return l, lim, err
}
