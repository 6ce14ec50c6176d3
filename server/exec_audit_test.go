package server

import (
	"context"
	"net/http"
	"strings"
	"testing"
)

// TestServeExecIsAudited: a one-shot execution is in the audit log before
// it runs and after it ends, with the key that asked for it.
func TestServeExecIsAudited(t *testing.T) {
	ts := newTestServer(t, testOptions{noModel: true})
	var res struct{ Status string }
	ts.json(t, "POST", "/v1/exec", "", map[string]any{"language": "python", "code": "print(1)"}, http.StatusOK, &res)
	recs, err := ts.st.AuditLog(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, r := range recs {
		kinds = append(kinds, r.Kind)
	}
	if got := strings.Join(kinds, " "); got != "exec_request exec_start exec_end" {
		t.Fatalf("audit records: %q", got)
	}
	if !strings.Contains(string(recs[0].Data), `"key":"anonymous"`) {
		t.Errorf("the request's record names no key: %s", recs[0].Data)
	}
}
