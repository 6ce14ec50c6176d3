package server

import (
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/codeagent/codeagent/app"
	"github.com/codeagent/codeagent/kernel"
	"github.com/codeagent/codeagent/store"
)

// TestStatusOfEveryClass: every error class has its HTTP status, and an
// error of each reaches the client with that status, its code and a
// Retry-After where the class says when to come back.
func TestStatusOfEveryClass(t *testing.T) {
	for _, c := range app.Classes {
		if _, ok := statusOf[c]; !ok {
			t.Errorf("class %s has no HTTP status", c)
		}
	}
	for _, c := range []struct {
		err    error
		status int
		code   string
	}{
		{fmt.Errorf("decode: %w", app.Errorf(app.Invalid, "bad")), http.StatusBadRequest, "bad_request"},
		{&kernel.BusyError{Max: 1, RetryAfter: 2 * time.Second}, http.StatusTooManyRequests, "kernels_busy"},
		{&store.LeaseHeldError{Session: "s"}, http.StatusConflict, "session_busy"},
		{store.ErrNotFound, http.StatusNotFound, "not_found"},
		{errors.New("boom at /srv/data"), http.StatusInternalServerError, "internal"},
	} {
		ae := classify(c.err)
		if ae.Status != c.status || ae.Code != c.code {
			t.Errorf("classify(%v) = %d %s, want %d %s", c.err, ae.Status, ae.Code, c.status, c.code)
		}
		if ae.Code == "internal" && ae.Message != "internal error" {
			t.Errorf("an unexpected error is shown to the client: %q", ae.Message)
		}
	}
	if ae := classify(&kernel.BusyError{Max: 1, RetryAfter: 2 * time.Second}); ae.RetryAfter != 2*time.Second {
		t.Errorf("kernels busy: Retry-After %v, want 2s", ae.RetryAfter)
	}
}
