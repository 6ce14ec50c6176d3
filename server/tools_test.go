package server

import (
	"net/http"
	"strings"
	"testing"

	"github.com/codeagent/codeagent/agent"
	"github.com/codeagent/codeagent/llm/llmtest"
)

// A run in tool mode: its cells run in the session's kernel (whose state
// the session keeps after the run), the events show each call, and the
// result has the replayed program.
func TestServeRunToolMode(t *testing.T) {
	ts := newTestServer(t, testOptions{replies: []llmtest.Reply{
		llmtest.Call(llmtest.ToolCall("execute_python", map[string]string{"code": "import pandas as pd\n\ndf = pd.read_csv('sales.csv')\nprint(len(df), 'rows')\n"})),
		llmtest.Call(llmtest.ToolCall("execute_python", map[string]string{"code": "print('units', df['units'].sum())\n"})),
		llmtest.Say("Printed the units."),
		llmtest.Say(verifyOK),
	}})
	s := ts.createSession(t, "", "tools")
	if resp, b := ts.upload(t, "", s.ID, map[string]string{"sales.csv": salesCSV}); resp.StatusCode != http.StatusCreated {
		t.Fatalf("upload: %d %s", resp.StatusCode, b)
	}
	ts.json(t, "POST", "/v1/sessions/"+s.ID+"/runs", "", map[string]any{"task": "sum the units", "mode": "tool"}, http.StatusBadRequest, nil)
	ts.json(t, "POST", "/v1/sessions/"+s.ID+"/runs", "", map[string]any{"task": "sum the units", "max_steps": 500}, http.StatusBadRequest, nil)
	var run runJSON
	ts.json(t, "POST", "/v1/sessions/"+s.ID+"/runs", "", map[string]any{"task": "sum the units", "mode": "tools", "max_steps": 5}, http.StatusAccepted, &run)
	got := ts.waitRun(t, "", run.ID)
	if got.Status != runSucceeded || got.Result == nil || got.Result.Mode != agent.ModeTools || !strings.Contains(got.Result.Output, "units ") {
		t.Fatalf("run: %+v", got)
	}
	var types []string
	for _, e := range ts.events(t, "", run.ID, "") {
		types = append(types, string(e.Event.Type))
	}
	if joined := strings.Join(types, " "); strings.Count(joined, "tool_call") != 2 || !strings.HasSuffix(joined, "verified replayed done") {
		t.Errorf("events: %s", joined)
	}
	var full sessionJSON
	ts.json(t, "GET", "/v1/sessions/"+s.ID, "", nil, 200, &full)
	if full.Kernel == nil || !full.Kernel.Alive || full.Kernel.ExecutionCount != 2 {
		t.Errorf("the session's kernel: %+v", full.Kernel)
	}
}
