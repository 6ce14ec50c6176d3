package agent

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/codeagent/codeagent/internal/testca"
	"github.com/codeagent/codeagent/sandbox"
)

// A host a person grants to a run that had no network gets the door's
// authorities (Deps.GrantBase, an operator's --ca-cert): a program reaches
// an HTTPS host of a private authority once it is granted.
func TestAGrantedHostTrustsTheDoorsAuthorities(t *testing.T) {
	ca := testca.New(t, "codeagent grant test CA")
	srv := ca.Serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "granted-ok") }), "fetch.test")
	prog := "# network: fetch.test\nimport urllib.request\nprint(urllib.request.urlopen('https://fetch.test/', timeout=10).read().decode())\n"
	person := &scriptedPerson{decisions: []Decision{{Decision: DecisionApprove}}}
	base := &sandbox.Network{Resolve: map[string]string{"fetch.test": srv.Listener.Addr().String()}, CACerts: ca.PEM}
	a, _, ws, _ := setupWith(t, wires[0], Config{Approve: ApproveOnFinding, MaxIterations: 1}, nil,
		func(d *Deps) { d.Approver, d.GrantBase = person, base }, py(prog))
	res, err := a.Run(context.Background(), Task{Prompt: "fetch it", Workspace: ws})
	if err != nil || !res.Success || strings.TrimSpace(res.Output) != "granted-ok" {
		t.Fatalf("success %v output %q message %q err %v", res.Success, res.Output, res.Message, err)
	}
}
