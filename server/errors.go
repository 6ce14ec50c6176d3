package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/codeagent/codeagent/app"
)

// apiError is an error with its HTTP status and a stable code for clients.
type apiError struct {
	Status     int
	Code       string
	Message    string
	RetryAfter time.Duration // for 429 and 503
}

func (e *apiError) Error() string { return e.Message }

func badRequest(format string, a ...any) error { return app.Errorf(app.Invalid, format, a...) }

func notFound(what string) error { return app.Errorf(app.NotFound, "%s not found", what) }

func conflict(format string, a ...any) error { return app.Errorf(app.Conflict, format, a...) }

var errDraining = &app.Error{Class: app.Unavailable, Code: "shutting_down",
	Message: "the server is shutting down", RetryAfter: 5 * time.Second}

// errDiskFull is every failure caused by a full disk under the server.
var errDiskFull = &apiError{Status: http.StatusInsufficientStorage, Code: "disk_full",
	Message: "the server's disk is full: nothing was stored; try again when an operator has made room"}

// publicMessage is msg without host paths (see app.PublicMessage).
func publicMessage(msg string) string { return app.PublicMessage(msg) }

// errorBody is the JSON of every error answer.
type errorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// statusOf is the one place where the error classes (app.Class) become
// HTTP statuses:
//
//	invalid 400, not_found 404, conflict 409, busy 429 (with Retry-After),
//	forbidden 403, disk_full 507, sandbox_setup 503, unavailable 503
//	(with Retry-After), provider 502, timeout 504, internal 500; but a
//	session held by another process (busy) is 409 session_busy.
//
// The API's own refusals (401 unauthorized, 403 cross_origin, 413 bodies
// and quotas, 415, 421) are apiErrors made where they are found.
var statusOf = map[app.Class]int{
	app.Invalid:     http.StatusBadRequest,
	app.NotFound:    http.StatusNotFound,
	app.Conflict:    http.StatusConflict,
	app.Busy:        http.StatusTooManyRequests,
	app.Forbidden:   http.StatusForbidden,
	app.DiskFull:    http.StatusInsufficientStorage,
	app.Setup:       http.StatusServiceUnavailable,
	app.Unavailable: http.StatusServiceUnavailable,
	app.Provider:    http.StatusBadGateway,
	app.Timeout:     http.StatusGatewayTimeout,
	app.Internal:    http.StatusInternalServerError,
}

// classify is the one place where errors become HTTP answers: the API's
// own (apiError, a body over its size), then every other by its class.
func classify(err error) *apiError {
	var ae *apiError
	var mb *http.MaxBytesError
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.As(err, &mb):
		return &apiError{Status: http.StatusRequestEntityTooLarge, Code: "too_large",
			Message: fmt.Sprintf("the request body is larger than %d bytes", mb.Limit)}
	}
	d := app.Describe(err)
	switch d.Code {
	case "unsafe_workspace":
		// No request names a host directory: the server's own directory
		// (its --data-dir) is where workspaces must not be. The log has it.
		return &apiError{Status: http.StatusInternalServerError, Code: d.Code,
			Message: "the server keeps its workspaces in a directory that must not hold one (a system or home directory): the operator should give it another data directory"}
	case "symlink_refused":
		// The full error, with the server's paths, goes to the log only.
		return &apiError{Status: http.StatusConflict, Code: d.Code, Message: d.Message + " (the server log has the path)"}
	case "disk_full":
		return errDiskFull
	case "session_busy":
		// Busy, but answered as before: 409, as the session's state.
		return &apiError{Status: http.StatusConflict, Code: d.Code, Message: d.Message}
	}
	status, ok := statusOf[d.Class]
	if !ok {
		status = http.StatusInternalServerError
	}
	return &apiError{Status: status, Code: d.Code, Message: d.Message, RetryAfter: d.RetryAfter}
}

// writeError answers with err's status and JSON body; unexpected errors
// are logged, never shown.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	ae := classify(err)
	if ae.Status >= 500 || ae.Code == "symlink_refused" || ae.Code == "session_busy" {
		s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "status", ae.Status, "err", err)
	}
	if ae.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(ae.RetryAfter.Seconds()))))
	}
	if ae.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="codeagent"`)
	}
	var body errorBody
	body.Error.Code, body.Error.Message = ae.Code, ae.Message
	writeJSON(w, ae.Status, body)
}

// writeJSON answers with v as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	_ = enc.Encode(v)
}

// decodeJSON reads one JSON object of at most max bytes into v, refusing
// unknown fields and trailing data.
func decodeJSON(w http.ResponseWriter, r *http.Request, max int64, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, max))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			return err
		}
		return badRequest("invalid JSON body: %v", err)
	}
	if dec.More() {
		return badRequest("invalid JSON body: more than one value")
	}
	return nil
}
