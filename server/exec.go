package server

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/codeagent/codeagent/app"
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
	prog, err := s.program(req.Language, req.Code, req.Env, req.Limits)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	l := prog.Lang
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
	prog.Stdin, prog.Network = strings.NewReader(req.Stdin), network
	spec := prog.Spec(dir)
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

// program is the program of /v1/exec and of a session's fresh exec, as the
// request names its language and sets its code, environment and limits
// (within the server's range), validated (app.Program.Validate).
func (s *Server) program(language, code string, env map[string]string, raw map[string]json.RawMessage) (app.Program, error) {
	l, err := app.LookupLanguage(language)
	if err != nil {
		return app.Program{}, err
	}
	limits, err := s.limits(raw)
	if err != nil {
		return app.Program{}, err
	}
	p := app.Program{Lang: l, Code: []byte(code), Env: env, Limits: sandbox.DefaultLimits().Overlay(limits)}
	return p, p.Validate()
}
