package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/codeagent/codeagent/app"
	"github.com/codeagent/codeagent/egress"
	"github.com/codeagent/codeagent/internal/lazyre"
	"github.com/codeagent/codeagent/kernel"
	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/sandbox/ratelimit"
	"github.com/codeagent/codeagent/session"
	"github.com/codeagent/codeagent/store"
)

// apiError is an error with its HTTP status and a stable code for clients.
type apiError struct {
	Status     int
	Code       string
	Message    string
	RetryAfter time.Duration // for 429 and 503
}

func (e *apiError) Error() string { return e.Message }

func badRequest(format string, a ...any) error {
	return &apiError{Status: http.StatusBadRequest, Code: "bad_request", Message: fmt.Sprintf(format, a...)}
}

func notFound(what string) error {
	return &apiError{Status: http.StatusNotFound, Code: "not_found", Message: what + " not found"}
}

func conflict(format string, a ...any) error {
	return &apiError{Status: http.StatusConflict, Code: "conflict", Message: fmt.Sprintf(format, a...)}
}

var errDraining = &apiError{Status: http.StatusServiceUnavailable, Code: "shutting_down",
	Message: "the server is shutting down", RetryAfter: 5 * time.Second}

// errDiskFull is every failure caused by a full disk under the server.
var errDiskFull = &apiError{Status: http.StatusInsufficientStorage, Code: "disk_full",
	Message: "the server's disk is full: nothing was stored; try again when an operator has made room"}

// hostPath matches what looks like an absolute host path in a message.
var hostPath = lazyre.New(`(^|[\s"'(=:])/[^\s"')]*`)

// publicMessage is msg without host paths: API answers and run errors
// never show where the server keeps its files (the log has them).
func publicMessage(msg string) string {
	return hostPath.ReplaceAllString(msg, "$1[path]")
}

// errorBody is the JSON of every error answer.
type errorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// classify is the one place where errors become HTTP statuses.
func classify(err error) *apiError {
	var ae *apiError
	var qf *app.QueueFullError
	var le *ratelimit.LimitError
	var mb *http.MaxBytesError
	var se *sandbox.SetupError
	var kb *kernel.BusyError
	var ce *egress.CeilingError
	var re *egress.RuleError
	var held *store.LeaseHeldError
	var audit *session.AuditError
	switch {
	case errors.As(err, &ae):
		return ae
	case store.IsDiskFull(err):
		return errDiskFull
	case errors.As(err, &held):
		return &apiError{Status: http.StatusConflict, Code: "session_busy",
			Message: fmt.Sprintf("the session is in use by another codeagent process (%s)", held.Holder.Owner.Describe())}
	case errors.As(err, &audit):
		return &apiError{Status: http.StatusInternalServerError, Code: "audit_failed", Message: publicMessage(audit.Error())}
	case errors.As(err, &qf):
		return &apiError{Status: http.StatusTooManyRequests, Code: "queue_full", Message: err.Error(), RetryAfter: qf.RetryAfter}
	case errors.As(err, &kb):
		return &apiError{Status: http.StatusTooManyRequests, Code: "kernels_busy", Message: err.Error(), RetryAfter: kb.RetryAfter}
	case errors.Is(err, kernel.ErrInvalid):
		return &apiError{Status: http.StatusBadRequest, Code: "bad_request", Message: err.Error()}
	case errors.Is(err, kernel.ErrWorkspace):
		return &apiError{Status: http.StatusConflict, Code: "conflict", Message: err.Error()}
	case errors.Is(err, kernel.ErrEnded):
		return &apiError{Status: http.StatusServiceUnavailable, Code: "kernel_ended", Message: "the kernel ended before the cell ran: try again", RetryAfter: time.Second}
	case errors.As(err, &le):
		return &apiError{Status: http.StatusTooManyRequests, Code: "rate_limited", Message: err.Error(), RetryAfter: le.Wait}
	case errors.As(err, &mb):
		return &apiError{Status: http.StatusRequestEntityTooLarge, Code: "too_large",
			Message: fmt.Sprintf("the request body is larger than %d bytes", mb.Limit)}
	case errors.Is(err, store.ErrNotFound):
		return &apiError{Status: http.StatusNotFound, Code: "not_found", Message: "not found"}
	case errors.Is(err, store.ErrExists):
		return &apiError{Status: http.StatusConflict, Code: "conflict", Message: err.Error()}
	case errors.As(err, &ce):
		return &apiError{Status: http.StatusForbidden, Code: "network_not_allowed", Message: err.Error()}
	case errors.As(err, &re):
		return &apiError{Status: http.StatusBadRequest, Code: "bad_request", Message: "network.allow: " + err.Error()}
	case errors.Is(err, sandbox.ErrUnsafeWorkspace):
		// No request names a host directory: the server's own directory
		// (its --data-dir) is where workspaces must not be. The log has it.
		return &apiError{Status: http.StatusInternalServerError, Code: "unsafe_workspace",
			Message: "the server keeps its workspaces in a directory that must not hold one (a system or home directory): the operator should give it another data directory"}
	case errors.Is(err, sandbox.ErrInvalidSpec), errors.Is(err, app.ErrInvalid):
		return &apiError{Status: http.StatusBadRequest, Code: "bad_request", Message: err.Error()}
	case errors.Is(err, sandbox.ErrSymlinkInPath):
		// The full error, with the server's paths, goes to the log only.
		return &apiError{Status: http.StatusConflict, Code: "symlink_refused",
			Message: "a directory on the way to the workspace is a symbolic link that codeagent did not make, and it does not follow it (the server log has the path)"}
	case errors.As(err, &se):
		// The reason only: the cause names cgroups, mounts and directories
		// of the host, which the log shows.
		return &apiError{Status: http.StatusServiceUnavailable, Code: "sandbox_unavailable",
			Message: "the sandbox could not run the program: " + publicMessage(se.Reason)}
	case errors.Is(err, context.DeadlineExceeded):
		return &apiError{Status: http.StatusGatewayTimeout, Code: "timeout", Message: "the request took too long"}
	case errors.Is(err, context.Canceled):
		return &apiError{Status: http.StatusServiceUnavailable, Code: "canceled", Message: "the request was canceled"}
	}
	return &apiError{Status: http.StatusInternalServerError, Code: "internal", Message: "internal error"}
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
