package server

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/codeagent/codeagent/agent"
	"github.com/codeagent/codeagent/internal/pyindex"
	"github.com/codeagent/codeagent/llm/llmtest"
	"github.com/codeagent/codeagent/sandbox"
)

// POST /v1/exec installs a request's dependencies from an index within
// the server's egress ceiling, once, and refuses an index beyond it, a
// requirement it does not install, and a package the index lacks, each
// with a 4xx naming it.
func TestExecDependencies(t *testing.T) {
	fn, data, err := pyindex.Wheel("seabird", "1.0", map[string]string{"seabird/__init__.py": "VALUE = 42\n"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ix := pyindex.New(t, pyindex.Dist{Project: "seabird", Filename: fn, Data: data})
	ts := newTestServer(t, testOptions{noModel: true, cfg: Config{EgressCeiling: []string{ix.Host()}}})
	body := map[string]any{"language": "python", "code": "import seabird\nprint(seabird.VALUE)\n",
		"dependencies": map[string]any{"python": []string{"seabird==1.0"}, "index_url": ix.URL()}}
	for range 2 {
		var res sandbox.ResultJSON
		ts.json(t, "POST", "/v1/exec", "", body, http.StatusOK, &res)
		if strings.TrimSpace(res.Stdout) != "42" || res.Egress != nil {
			t.Fatalf("result %+v", res)
		}
	}
	if ix.Files() != 1 {
		t.Errorf("%d downloads for two executions, want 1", ix.Files())
	}
	recs, err := ts.st.AuditLog(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	installs := 0
	for _, r := range recs {
		if r.Kind == "dependencies" && strings.Contains(string(r.Data), `"name":"seabird"`) && strings.Contains(string(r.Data), `"sha256":"`) {
			installs++
		}
	}
	if installs != 2 {
		t.Errorf("%d dependencies records, want one per execution", installs)
	}
	for _, c := range []struct {
		deps   string
		status int
		want   string
	}{
		{`{"python": ["seabird"], "index_url": "http://127.0.0.1:1/simple/"}`, 403, "egress ceiling"},
		{`{"python": ["seabird"]}`, 403, "pypi.org"},
		{`{"python": ["seabird @ https://evil.test/s.whl"], "index_url": "` + ix.URL() + `"}`, 400, "not a requirement"},
		{`{"python": ["albatross"], "index_url": "` + ix.URL() + `"}`, 400, "albatross"},
		{`{"index_url": "` + ix.URL() + `"}`, 400, "needs dependencies.python"},
	} {
		resp, b := ts.do(t, "POST", "/v1/exec", "", strings.NewReader(fmt.Sprintf(`{"language": "python", "code": "print(1)", "dependencies": %s}`, c.deps)),
			"Content-Type", "application/json")
		if resp.StatusCode != c.status || !strings.Contains(string(b), c.want) {
			t.Errorf("%s: %d %s", c.deps, resp.StatusCode, b)
		}
	}
	resp, b := ts.do(t, "POST", "/v1/exec", "", strings.NewReader(`{"language": "javascript", "code": "1", "dependencies": {"python": ["seabird"]}}`),
		"Content-Type", "application/json")
	if resp.StatusCode != 400 || !strings.Contains(string(b), "Python") {
		t.Errorf("javascript with dependencies: %d %s", resp.StatusCode, b)
	}
}

// A session's run takes dependencies too: installed as the run starts,
// given to its programs, named to the model; tool mode is refused.
func TestRunDependencies(t *testing.T) {
	fn, data, err := pyindex.Wheel("seabird", "1.0", map[string]string{"seabird/__init__.py": "VALUE = 42\n"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ix := pyindex.New(t, pyindex.Dist{Project: "seabird", Filename: fn, Data: data})
	ts := newTestServer(t, testOptions{cfg: Config{EgressCeiling: []string{ix.Host()}},
		replies: []llmtest.Reply{pyReply("import seabird\nprint(seabird.VALUE)\n"), llmtest.Say(verifyOK)}})
	s := ts.createSession(t, "", "birds")
	deps := map[string]any{"python": []string{"seabird==1.0"}, "index_url": ix.URL()}
	ts.json(t, "POST", "/v1/sessions/"+s.ID+"/runs", "", map[string]any{"task": "print the value", "mode": "tools", "dependencies": deps},
		http.StatusBadRequest, nil)
	var run runJSON
	ts.json(t, "POST", "/v1/sessions/"+s.ID+"/runs", "", map[string]any{"task": "print the value", "dependencies": deps},
		http.StatusAccepted, &run)
	evs := ts.events(t, "", run.ID, "")
	last := evs[len(evs)-1].Event
	if last.Type != agent.EventDone || last.Success == nil || !*last.Success {
		t.Fatalf("the run did not succeed: %+v", last)
	}
	if reqs := ts.model.Requests(); len(reqs) == 0 || !strings.Contains(reqs[0].Text(), "installed for this task: seabird 1.0") {
		t.Errorf("the model is not told what is installed")
	}
}
