package session

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/codeagent/codeagent/agent"
	"github.com/codeagent/codeagent/llm"
	"github.com/codeagent/codeagent/llm/llmtest"
	"github.com/codeagent/codeagent/llm/providers"
	"github.com/codeagent/codeagent/safety"
	"github.com/codeagent/codeagent/sandbox/backends"
	"github.com/codeagent/codeagent/store"
	"github.com/codeagent/codeagent/workspace"
)

// A tool-mode run through the session's wiring: its kernel's cells are
// audited before they run, and the audit log shows each tool call, its
// result and the replay; the turn records the assembled program.
func TestToolModeRunIsAudited(t *testing.T) {
	ctx := context.Background()
	sb, err := backends.Open("auto", backends.Options{})
	if err != nil {
		t.Skipf("no sandbox here: %v", err)
	}
	defer sb.Close()
	ck, err := safety.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "codeagent.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	sess, err := st.CreateSession(ctx, "tools", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	call := func(code string) llmtest.Reply {
		return llmtest.Call(llmtest.ToolCall("execute_python", map[string]string{"code": code}))
	}
	srv := llmtest.NewOpenAIServer(t, call("total = sum(range(5))\n"), call("print('total', total)\n"), llmtest.Say("Printed."))
	p, err := providers.New(llmtest.Config(llm.ProviderOpenAI, srv.BaseURL), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	run, err := Start(ctx, Options{Store: st, Session: &sess, Task: "print the total of 0..4", Purpose: "test", Sandbox: sb})
	if err != nil {
		t.Fatal(err)
	}
	ws, err := workspace.New(filepath.Join(t.TempDir(), "ws"))
	if err != nil {
		t.Fatal(err)
	}
	a, err := agent.New(agent.Config{Mode: agent.ModeTools}, agent.Deps{Provider: p, Sandbox: run.Sandbox, Checker: ck, Observer: run.Rec})
	if err != nil {
		t.Fatal(err)
	}
	rctx, err := run.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	res, err := a.Run(rctx, agent.Task{Prompt: "print the total of 0..4", Workspace: ws, NewKernel: run.NewKernel})
	if ferr := run.Finish(res, err, ws.Dir, nil); ferr != nil || err != nil {
		t.Fatalf("run: %v, finish: %v", err, ferr)
	}
	if !res.Success || res.Output != "total 10\n" {
		t.Fatalf("res %+v", res)
	}
	recs, err := st.AuditLog(ctx, "tools")
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	cells := 0
	for _, r := range recs {
		kinds = append(kinds, r.Kind)
		if r.Kind == store.KindExecStart && strings.Contains(string(r.Data), `"kernel_cell":true`) {
			cells++
		}
	}
	joined := strings.Join(kinds, " ")
	// Each cell is recorded (exec_start) before it runs; the kernel (its
	// start inside the first cell's records, its end before done) and
	// the replay are executions of the sandbox.
	if cells != 2 || strings.Count(joined, "tool_call") != 2 || strings.Count(joined, "tool_result") != 2 ||
		!strings.Contains(joined, "tool_call checked exec_start exec_end executed tool_result") || !strings.Contains(joined, "replayed exec_end done") {
		t.Errorf("audit log: %s", joined)
	}
	turns, _ := st.Turns(ctx, sess.ID)
	if len(turns) != 1 || turns[0].Status != store.TurnSucceeded || !strings.Contains(turns[0].Code, "print('total', total)") {
		t.Errorf("turn %+v", turns)
	}
}
