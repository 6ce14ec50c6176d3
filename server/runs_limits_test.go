package server

import (
	"net/http"
	"testing"

	"github.com/codeagent/codeagent/agent"
	"github.com/codeagent/codeagent/llm/llmtest"
)

// TestRunMaxIterationsAsEveryDoor: a run may be given as many attempts
// through the API as through the CLI, MCP and agent.New (up to
// agent.MaxIterationsCeiling; 50 was once a 400 here), and no more.
func TestRunMaxIterationsAsEveryDoor(t *testing.T) {
	ts := newTestServer(t, testOptions{replies: []llmtest.Reply{{Text: "```python\nprint(1)\n```"}}})
	sess := ts.createSession(t, "", "iters")
	ts.json(t, "POST", "/v1/sessions/"+sess.ID+"/runs", "", map[string]any{"task": "t", "verify": false, "max_iterations": 50}, http.StatusAccepted, nil)
	ts.json(t, "POST", "/v1/sessions/"+sess.ID+"/runs", "", map[string]any{"task": "t", "verify": false, "max_iterations": agent.MaxIterationsCeiling + 1}, http.StatusBadRequest, nil)
}
