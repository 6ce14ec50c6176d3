package server

import (
	"context"
	"errors"
	"net/http"
	"runtime/debug"
	"time"
)

// routeKind decides a route's time bounds.
type routeKind int

const (
	kindPlain  routeKind = iota // RequestTimeout
	kindUpload                  // UploadTimeout
	kindExec                    // the longest allowed execution plus RequestTimeout
	kindStream                  // Server-Sent Events: no write deadline, ends with the run
)

// routes registers every route on a standard library mux, each with the
// body it accepts (see guard.go).
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	api := func(pattern string, kind routeKind, body bodyKind, h http.HandlerFunc) {
		mux.Handle(pattern, s.wrap(route{kind: kind, auth: true, body: body}, h))
	}
	open := func(pattern string, h http.HandlerFunc) { mux.Handle(pattern, s.wrap(route{kind: kindPlain}, h)) }
	page := func(pattern string, h http.HandlerFunc) {
		mux.Handle(pattern, s.wrap(route{kind: kindPlain, page: true}, h))
	}

	open("GET /v1/health", s.handleHealth)
	open("GET /v1/openapi.yaml", s.handleOpenAPI)
	mux.Handle("GET /metrics", s.wrap(route{kind: kindPlain, auth: s.auth.enabled()}, s.handleMetrics))
	api("POST /v1/sessions", kindPlain, bodyJSON, s.handleCreateSession)
	api("GET /v1/sessions", kindPlain, bodyNone, s.handleListSessions)
	api("GET /v1/sessions/{id}", kindPlain, bodyNone, s.handleGetSession)
	api("DELETE /v1/sessions/{id}", kindPlain, bodyNone, s.handleDeleteSession)
	api("GET /v1/sessions/{id}/files", kindPlain, bodyNone, s.handleListFiles)
	api("POST /v1/sessions/{id}/files", kindUpload, bodyMultipart, s.handleUploadMultipart)
	api("PUT /v1/sessions/{id}/files/{name}", kindUpload, bodyRaw, s.handleUploadRaw)
	api("GET /v1/sessions/{id}/files/{path...}", kindUpload, bodyNone, s.handleDownload)
	api("DELETE /v1/sessions/{id}/files/{path...}", kindPlain, bodyNone, s.handleDeleteFile)
	api("POST /v1/sessions/{id}/runs", kindPlain, bodyJSON, s.handleStartRun)
	api("GET /v1/runs/{id}", kindPlain, bodyNone, s.handleGetRun)
	api("GET /v1/runs/{id}/events", kindStream, bodyNone, s.handleRunEvents)
	api("POST /v1/runs/{id}/cancel", kindPlain, bodyNone, s.handleCancelRun)
	api("POST /v1/runs/{id}/approvals/{approval_id}", kindPlain, bodyJSON, s.handleDecide)
	api("POST /v1/exec", kindExec, bodyJSON, s.handleExec)
	api("POST /v1/sessions/{id}/exec", kindExec, bodyJSON, s.handleSessionExec)
	api("DELETE /v1/sessions/{id}/kernel", kindPlain, bodyNone, s.handleRestartKernel)
	api("GET /v1/sessions/{id}/cells", kindPlain, bodyNone, s.handleListCells)
	if s.deps.MCP != nil {
		// Streamable HTTP holds responses open: no write deadline. The
		// guard checks Host and Origin here as everywhere.
		mcp := s.deps.MCP.HandlerWithOwner(func(r *http.Request) string { return ownerOf(r.Context()) })
		api("POST /mcp", kindStream, bodyJSON, mcp.ServeHTTP) // the streamable HTTP transport's methods
		api("GET /mcp", kindStream, bodyNone, mcp.ServeHTTP)
		api("DELETE /mcp", kindStream, bodyNone, mcp.ServeHTTP)
	}
	mux.Handle("/v1/", s.wrap(route{kind: kindPlain, body: bodyRaw}, func(w http.ResponseWriter, r *http.Request) { s.writeError(w, r, notFound("route")) }))
	page("GET /{$}", s.handlePage)
	page("GET /{file}", s.handleAsset)
	return mux
}

// recorder remembers the status and size of an answer for the log.
type recorder struct {
	http.ResponseWriter
	status int
	bytes  int64
	owner  string
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	n, err := r.ResponseWriter.Write(b)
	r.bytes += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController reach the connection (flush, deadlines).
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// timeout is the time bound of a route kind.
func (s *Server) timeout(kind routeKind) time.Duration {
	switch kind {
	case kindUpload:
		return s.cfg.UploadTimeout
	case kindExec:
		return s.cfg.ExecMaxLimits.WallTime + s.cfg.RequestTimeout
	case kindStream:
		return s.cfg.RunTimeout + time.Minute
	}
	return s.cfg.RequestTimeout
}

// wrap adds to h: security headers, time bounds, panic recovery, the
// request log and metrics, the guard (Host, Origin, body type), and (with
// auth) the API key or local token and the rate limit.
func (s *Server) wrap(rt route, h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &recorder{ResponseWriter: w}
		hd := w.Header()
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("Referrer-Policy", "no-referrer")
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("Cross-Origin-Resource-Policy", "same-origin")
		d := s.timeout(rt.kind)
		rc := http.NewResponseController(rec)
		_ = rc.SetReadDeadline(start.Add(d))
		if rt.kind != kindStream {
			_ = rc.SetWriteDeadline(start.Add(d + 5*time.Second))
		}
		ctx, cancel := context.WithTimeout(r.Context(), d)
		defer cancel()
		r = r.WithContext(ctx)
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				s.log.Error("panic in handler", "method", r.Method, "path", r.URL.Path, "panic", p, "stack", string(debug.Stack()))
				if rec.status == 0 {
					s.writeError(rec, r, errors.New("panic"))
				}
			}
			status := rec.status
			if status == 0 {
				status = http.StatusOK
			}
			s.metrics.request(status)
			s.log.Info("request", "method", r.Method, "route", r.Pattern, "path", r.URL.Path, "status", status,
				"bytes", rec.bytes, "ms", time.Since(start).Milliseconds(), "key", rec.owner, "remote", r.RemoteAddr)
		}()
		if err := s.guard(r, rt); err != nil {
			s.writeError(rec, r, err)
			return
		}
		if rt.auth {
			owner, err := s.auth.owner(r, s.tokenCookie(r))
			if err == errUnauthorized && s.cfg.LocalToken != "" {
				err = errNeedToken
			}
			if err == nil {
				rec.owner = owner
				err = s.auth.allow(owner)
			}
			if err != nil {
				s.writeError(rec, r, err)
				return
			}
			r = r.WithContext(context.WithValue(r.Context(), ownerKey{}, owner))
		}
		h(rec, r)
	})
}

func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	status, code := "ok", http.StatusOK
	if s.isDraining() {
		status, code = "shutting_down", http.StatusServiceUnavailable
	}
	writeJSON(w, code, map[string]any{"status": status, "auth": s.auth.enabled(), "model": s.deps.Model != nil})
}
