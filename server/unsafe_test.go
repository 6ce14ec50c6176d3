package server

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/codeagent/codeagent/sandbox"
)

// No request names a host directory, so a workspace refused as unsafe is
// the server's own data directory's fault: a 500 for the operator, and no
// host path in the answer (the log has it), whether the workspace package
// or a backend refused it.
func TestUnsafeWorkspaceIsTheOperatorsError(t *testing.T) {
	unsafe := sandbox.CheckWorkspaceDir("/etc/codeagent/server/k/s1/workspace")
	if unsafe == nil {
		t.Fatal("a workspace in /etc was accepted")
	}
	for _, err := range []error{
		fmt.Errorf("workspace: %w", unsafe),
		&sandbox.SetupError{Reason: "workspace", Err: fmt.Errorf("workspace /etc/x: %w", unsafe)},
	} {
		ae := classify(err)
		if ae.Status != http.StatusInternalServerError || ae.Code != "unsafe_workspace" || strings.Contains(ae.Message, "/etc") {
			t.Errorf("classify(%v) = %+v; want a 500 unsafe_workspace without the path", err, ae)
		}
	}
}
