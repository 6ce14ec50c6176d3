package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/codeagent/codeagent/lang"
	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/workspace"
)

// Bounds of a /v1/exec request besides its body size.
const (
	maxExecFiles = 100
	maxExecEnv   = 64
)

// duration is a JSON duration: "10s", or a number of milliseconds.
type duration time.Duration

func (d *duration) UnmarshalJSON(b []byte) error {
	if bytes.HasPrefix(b, []byte(`"`)) {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		v, err := time.ParseDuration(s)
		if err != nil || v < 0 {
			return fmt.Errorf("invalid duration %q: want e.g. \"10s\" or milliseconds", s)
		}
		*d = duration(v)
		return nil
	}
	var ms int64
	if err := json.Unmarshal(b, &ms); err != nil || ms < 0 {
		return fmt.Errorf("invalid duration %s: want e.g. \"10s\" or milliseconds", b)
	}
	*d = duration(time.Duration(ms) * time.Millisecond)
	return nil
}

// size is a JSON byte size: "256MiB", or a number of bytes.
type size int64

func (z *size) UnmarshalJSON(b []byte) error {
	if bytes.HasPrefix(b, []byte(`"`)) {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		v, err := sandbox.ParseSize(s)
		if err != nil {
			return err
		}
		*z = size(v)
		return nil
	}
	var n int64
	if err := json.Unmarshal(b, &n); err != nil || n < 0 {
		return fmt.Errorf("invalid size %s: want e.g. \"256MiB\" or bytes", b)
	}
	*z = size(n)
	return nil
}

// execLimits are the limits a request may set; absent ones take the
// sandbox defaults.
type execLimits struct {
	Timeout   duration `json:"timeout"`
	CPUTime   duration `json:"cpu_time"`
	Memory    size     `json:"memory"`
	Processes int      `json:"processes"`
	Output    size     `json:"output"`
	FileSize  size     `json:"file_size"`
	Disk      size     `json:"disk"`
	OpenFiles int      `json:"open_files"`
	CPUs      float64  `json:"cpus"`
}

// execRequest is the body of POST /v1/exec.
type execRequest struct {
	Language string            `json:"language"`
	Code     string            `json:"code"`
	Files    map[string]string `json:"files"`
	Stdin    string            `json:"stdin"`
	Env      map[string]string `json:"env"`
	Limits   execLimits        `json:"limits"`
	Network  *networkRequest   `json:"network"`
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)

// limits checks the request's limits against the server's caps.
func (s *Server) limits(l execLimits) (sandbox.Limits, error) {
	req := sandbox.Limits{WallTime: time.Duration(l.Timeout), CPUTime: time.Duration(l.CPUTime), Memory: int64(l.Memory),
		Processes: l.Processes, Output: int64(l.Output), FileSize: int64(l.FileSize), Disk: int64(l.Disk), OpenFiles: l.OpenFiles, CPUs: l.CPUs}
	if req.Processes < 0 || req.OpenFiles < 0 {
		return req, badRequest("limits must not be negative")
	}
	if c := req.CPUs; c != c || c < 0 || (c > 0 && c < 0.01) {
		return req, badRequest("limits.cpus must be a number of cores of at least 0.01")
	}
	if req.CPUs > s.cfg.ExecMaxLimits.CPUs {
		return req, badRequest("limits.cpus is over this server's maximum of %g", s.cfg.ExecMaxLimits.CPUs)
	}
	m := s.cfg.ExecMaxLimits
	over := func(name string, v, max int64) error {
		if v > max {
			return badRequest("limits.%s is over this server's maximum of %d", name, max)
		}
		return nil
	}
	for _, c := range []struct {
		name   string
		v, max int64
	}{
		{"timeout (ms)", req.WallTime.Milliseconds(), m.WallTime.Milliseconds()},
		{"cpu_time (ms)", req.CPUTime.Milliseconds(), m.CPUTime.Milliseconds()},
		{"memory", req.Memory, m.Memory}, {"processes", int64(req.Processes), int64(m.Processes)},
		{"output", req.Output, m.Output}, {"file_size", req.FileSize, m.FileSize},
		{"disk", req.Disk, m.Disk}, {"open_files", int64(req.OpenFiles), int64(m.OpenFiles)},
	} {
		if err := over(c.name, c.v, c.max); err != nil {
			return req, err
		}
	}
	return sandbox.DefaultLimits().Overlay(req), nil
}

// handleExec runs one program in a fresh temporary workspace holding the
// request's files and answers with the `exec --json` result object.
func (s *Server) handleExec(w http.ResponseWriter, r *http.Request) {
	var req execRequest
	if err := decodeJSON(w, r, s.cfg.MaxExecBody, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	l, err := lang.Lookup(req.Language)
	if err != nil {
		s.writeError(w, r, badRequest("%v", err))
		return
	}
	if strings.TrimSpace(req.Code) == "" {
		s.writeError(w, r, badRequest("code is required"))
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
	ws, err := workspace.NewTemp(tmp, "codeagent-exec-")
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
	res, err := (&queuedSandbox{s: s, source: "exec", bounded: true}).Run(r.Context(), spec)
	s.auditExec(r.Context(), ownerOf(r.Context()), res)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, res.JSON())
}
