package server

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"github.com/codeagent/codeagent/kernel"
	"io"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/codeagent/codeagent/app"
	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/store"
)

// Kernels: POST /v1/sessions/{id}/exec with "state": "keep" runs a cell in
// the session's kernel (package kernel), one per session and API key;
// "fresh", the default, runs a program in a fresh sandbox in the session's
// workspace, like /v1/exec. DELETE /v1/sessions/{id}/kernel restarts the
// kernel; GET /v1/sessions/{id} shows it.

// sessionExecRequest is the body of POST /v1/sessions/{id}/exec.
type sessionExecRequest struct {
	Language string                     `json:"language"`
	Code     string                     `json:"code"`
	State    string                     `json:"state"`
	Stdin    string                     `json:"stdin"`
	Env      map[string]string          `json:"env"`
	Limits   map[string]json.RawMessage `json:"limits"`
}

// kernelKey is the kernel of the caller's session: owner and session both.
func kernelKey(owner, id string) kernel.Key { return kernel.Key{Owner: owner, Session: id} }

func (s *Server) handleSessionExec(w http.ResponseWriter, r *http.Request) {
	var req sessionExecRequest
	if err := decodeJSON(w, r, s.cfg.MaxExecBody, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	o, err := s.session(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if req.State != "" && req.State != "fresh" && req.State != "keep" {
		s.writeError(w, r, badRequest("state must be keep or fresh, not %q", req.State))
		return
	}
	keep := req.State == "keep"
	var prog app.Program
	var timeout time.Duration
	if keep {
		timeout, err = s.cell(req)
	} else {
		prog, err = s.program(req.Language, req.Code, req.Env, req.Limits)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := s.workspaceFree(r.Context(), o.ID); err != nil {
		s.writeError(w, r, err)
		return
	}
	ws, err := s.sessionWorkspace(o.Owner, o.ID)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := s.beginExec(); err != nil {
		s.writeError(w, r, err)
		return
	}
	defer s.endExec()
	// Audited like /v1/exec: the request, then each execution's start
	// and end, in the session's name.
	language := "python" // a cell's (s.cell)
	if !keep {
		language = prog.Lang.Name
	}
	x, err := app.StartExec(r.Context(), app.ExecRequest{Store: s.deps.Store, Session: o.Name,
		Sandbox: s.executions.Sandbox("exec", true), Logger: s.log,
		Audit: app.AuditRecord{Kind: "exec_request", Data: map[string]any{"key": o.Owner, "language": language, "state": cmp.Or(req.State, "fresh")}}})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if !keep {
		prog.Stdin, prog.Cache = strings.NewReader(req.Stdin), ws.KeepsCache()
		spec := prog.Spec(ws.Dir)
		res, err := x.Run(r.Context(), spec)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, res.JSON())
		return
	}
	var res kernel.Result
	_, err = x.Cell(r.Context(), req.Code, timeout, func() (sandbox.Result, error) {
		var err error
		res, err = s.execCell(r.Context(), kernelKey(o.Owner, o.ID), ws.Dir, kernel.Cell{Code: req.Code, Stdin: req.Stdin, Timeout: timeout}, true)
		return res.Result, err
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	// Kept for the session's history; the cell has run whether or not
	// this works.
	if _, err := app.KeepCell(context.WithoutCancel(r.Context()), s.deps.Store, s.redact, o.ID, req.Code, res); err != nil {
		s.log.Warn("keep the cell", "session", o.ID, "err", err)
	}
	writeJSON(w, http.StatusOK, res.JSON())
}

// cell checks a session exec with state keep as a cell of the session's
// kernel (app.CellRequest.Validate) and returns its timeout: the request's
// limits.timeout, within the server's range, or the default.
func (s *Server) cell(req sessionExecRequest) (time.Duration, error) {
	limits, err := s.limits(req.Limits)
	if err != nil {
		return 0, err
	}
	c := app.CellRequest{Language: req.Language, Code: req.Code, Stdin: req.Stdin, Limits: limits, Env: req.Env}
	if err := c.Validate(); err != nil {
		return 0, err
	}
	return sandbox.DefaultLimits().Overlay(limits).WallTime, nil
}

// Cells listed at most by one GET /v1/sessions/{id}/cells, and by default.
const (
	maxCellsListed     = 200
	defaultCellsListed = 50
)

// cellJSON is a kept cell as GET /v1/sessions/{id}/cells shows it.
type cellJSON struct {
	store.Cell
	WallMS int64 `json:"wall_ms"`
}

// handleListCells lists the cells kept of the session's kernel (store.Cell),
// oldest first: the newest limit numbered above after and below before.
func (s *Server) handleListCells(w http.ResponseWriter, r *http.Request) {
	o, err := s.session(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	q := r.URL.Query()
	num := func(name string, def, hi int64) (int64, error) {
		v := q.Get(name)
		if v == "" {
			return def, nil
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 || n > hi {
			return 0, badRequest("%s must be a whole number from 0 to %d", name, hi)
		}
		return n, nil
	}
	after, err := num("after", 0, math.MaxInt64)
	var before, limit int64
	if err == nil {
		before, err = num("before", 0, math.MaxInt64)
	}
	if err == nil {
		if limit, err = num("limit", defaultCellsListed, maxCellsListed); err == nil && limit < 1 {
			err = badRequest("limit must be a whole number from 1 to %d", maxCellsListed)
		}
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	cells, more, err := s.deps.Store.Cells(r.Context(), o.ID, after, before, int(limit))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := make([]cellJSON, len(cells))
	for i, c := range cells {
		out[i] = cellJSON{Cell: c, WallMS: c.Wall.Milliseconds()}
	}
	writeJSON(w, http.StatusOK, map[string]any{"cells": out, "more": more})
}

// execCell runs a cell through the execution queue (bounded: refused
// when it is full, instead of waiting) and counts it (app.Kernels).
func (s *Server) execCell(ctx context.Context, key kernel.Key, ws string, c kernel.Cell, bounded bool) (kernel.Result, error) {
	return s.kernels.Exec(ctx, "kernel", bounded, key, ws, c)
}

// handleRestartKernel ends the session's kernel; the next cell starts a
// fresh one and says restart_reason "restart".
func (s *Server) handleRestartKernel(w http.ResponseWriter, r *http.Request) {
	o, err := s.session(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	was := s.kernels.Restart(kernelKey(o.Owner, o.ID))
	writeJSON(w, http.StatusOK, map[string]any{"restarted": was})
}

// kernelView is a session's kernel as GET /v1/sessions/{id} shows it, or
// nil when it never had one since the server started.
func (s *Server) kernelView(owner, id string) *kernel.Status {
	st, ok := s.kernels.Status(kernelKey(owner, id))
	if !ok {
		return nil
	}
	return &st
}

// writeKernelMetrics adds the kernels' figures to /metrics.
func (s *Server) writeKernelMetrics(w io.Writer) {
	st := s.kernels.Stats()
	gauges := []struct {
		name, help string
		v          int64
	}{
		{"codeagent_kernels_live", "Kernels running now.", int64(st.Live)},
		{"codeagent_kernels_busy", "Kernels running a cell now.", int64(st.Busy)},
		{"codeagent_kernels_max", "Kernels that may run at once (then the least recently used idle one is evicted).", int64(st.Max)},
		{"codeagent_kernel_memory_bytes", "Memory of all live kernels (their cgroups).", st.MemoryBytes},
		{"codeagent_kernel_rss_bytes", "Resident memory of all live kernels' processes.", st.RSSBytes},
		{"codeagent_kernel_rss_max_bytes", "Resident memory of the largest live kernel.", st.MaxRSSBytes},
		{"codeagent_kernel_idle_rss_max_bytes", "Resident memory of the largest idle kernel.", st.MaxIdleRSSBytes},
	}
	for _, g := range gauges {
		app.Header(w, g.name, "gauge", g.help)
		fmt.Fprintf(w, "%s %d\n", g.name, g.v)
	}
	app.Header(w, "codeagent_kernel_cells_total", "counter", "Cells run in kernels.")
	fmt.Fprintf(w, "codeagent_kernel_cells_total %d\n", st.Cells)
	app.Header(w, "codeagent_kernel_restarts_total", "counter", "Cells that found their kernel ended and started a fresh one, by reason.")
	for _, r := range st.RestartReasons() {
		fmt.Fprintf(w, "codeagent_kernel_restarts_total{reason=%q} %d\n", r, st.Restarts[r])
	}
}

// kernelsConfig are the kernels' settings from the server's.
func (c Config) kernelsConfig(sb sandbox.Sandbox, log *slog.Logger) app.KernelsConfig {
	return app.KernelsConfig{Sandbox: sb, Limits: c.KernelLimits, Max: c.MaxKernels, IdleTimeout: c.KernelIdleTimeout, Logger: log}
}
