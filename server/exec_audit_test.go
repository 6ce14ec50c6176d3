package server

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/codeagent/codeagent/store"
)

// TestServeExecIsAudited: a one-shot execution is in the audit log before
// it runs and after it ends, with the key that asked for it.
func TestServeExecIsAudited(t *testing.T) {
	ts := newTestServer(t, testOptions{noModel: true})
	var res struct{ Status string }
	ts.json(t, "POST", "/v1/exec", "", map[string]any{"language": "python", "code": "print(1)"}, http.StatusOK, &res)
	recs := auditKinds(t, ts, "", "exec_request exec_start exec_end")
	if !strings.Contains(string(recs[0].Data), `"key":"anonymous"`) {
		t.Errorf("the request's record names no key: %s", recs[0].Data)
	}
}

// TestSessionExecIsAudited: a cell of a session's kernel and a fresh
// program in its workspace are audited like /v1/exec, in the session's
// name, the cell's start before it runs.
func TestSessionExecIsAudited(t *testing.T) {
	ts := newTestServer(t, testOptions{noModel: true, warmPython: 1})
	s := ts.createSession(t, "", "audited")
	ts.cell(t, "", s.ID, "x = 1", http.StatusOK)
	ts.json(t, "POST", "/v1/sessions/"+s.ID+"/exec", "", map[string]any{"language": "python", "code": "print(1)"}, http.StatusOK, nil)
	o, err := ts.st.OwnedSession(context.Background(), "anonymous", s.ID)
	if err != nil {
		t.Fatal(err)
	}
	recs := auditKinds(t, ts, o.Name, "exec_request exec_start exec_end exec_request exec_start exec_end")
	if !strings.Contains(string(recs[1].Data), `"kernel_cell":true`) || !strings.Contains(string(recs[0].Data), `"state":"keep"`) {
		t.Errorf("the cell's records: %s %s", recs[0].Data, recs[1].Data)
	}
}

// TestSessionExecWhileLeased: while another process holds the session's
// lease (its run uses the workspace), neither a cell nor a program runs.
func TestSessionExecWhileLeased(t *testing.T) {
	ts := newTestServer(t, testOptions{noModel: true})
	s := ts.createSession(t, "", "leased")
	ctx := context.Background()
	o, err := ts.st.OwnedSession(ctx, "anonymous", s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ts.st.AcquireLease(ctx, o.Session, "codeagent run", time.Minute); err != nil {
		t.Fatal(err)
	}
	for _, state := range []string{"keep", "fresh"} {
		ts.json(t, "POST", "/v1/sessions/"+s.ID+"/exec", "", map[string]any{"language": "python", "code": "1", "state": state}, http.StatusConflict, nil)
	}
}

// auditKinds reads the audit log of session ("" for all) and fails unless
// its records are of the kinds want lists, in order.
func auditKinds(t *testing.T, ts *testServer, session, want string) []store.Record {
	t.Helper()
	recs, err := ts.st.AuditLog(context.Background(), session)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, r := range recs {
		kinds = append(kinds, r.Kind)
	}
	if got := strings.Join(kinds, " "); got != want {
		t.Fatalf("audit records: %q, want %q", got, want)
	}
	return recs
}
