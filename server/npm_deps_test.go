package server

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/codeagent/codeagent/internal/npmreg"
	"github.com/codeagent/codeagent/sandbox"
)

// POST /v1/exec installs a JavaScript program's npm packages from a
// registry within the egress ceiling, once, audited with their
// integrity; a registry beyond the ceiling, a spec codeagent does not
// install and packages of the other language are refused.
func TestExecJavaScriptDependencies(t *testing.T) {
	reg := npmreg.New(t, npmreg.Package{Name: "kiwi", Version: "1.0.0", Files: map[string]string{"index.js": "exports.x = 42\n"}})
	ts := newTestServer(t, testOptions{noModel: true, cfg: Config{EgressCeiling: []string{reg.Host()}}})
	body := map[string]any{"language": "javascript", "code": "console.log(require('kiwi').x)\n",
		"dependencies": map[string]any{"javascript": []string{"kiwi@1.0.0"}, "npm_registry": reg.URL()}}
	for range 2 {
		var res sandbox.ResultJSON
		ts.json(t, "POST", "/v1/exec", "", body, http.StatusOK, &res)
		if strings.TrimSpace(res.Stdout) != "42" || res.Egress != nil {
			t.Fatalf("result %+v", res)
		}
	}
	if reg.Downloads() != 1 {
		t.Errorf("%d downloads for two executions, want 1", reg.Downloads())
	}
	recs, err := ts.st.AuditLog(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	installs := 0
	for _, r := range recs {
		if r.Kind == "dependencies" && strings.Contains(string(r.Data), `"name":"kiwi"`) && strings.Contains(string(r.Data), `"integrity":"sha512-`) {
			installs++
		}
	}
	if installs != 2 {
		t.Errorf("%d dependencies records, want one per execution", installs)
	}
	for _, c := range []struct {
		lang, deps string
		status     int
		want       string
	}{
		{"javascript", `{"javascript": ["kiwi"], "npm_registry": "http://127.0.0.1:1/"}`, 403, "egress ceiling"},
		{"javascript", `{"javascript": ["kiwi"]}`, 403, "registry.npmjs.org"},
		{"javascript", `{"javascript": ["kiwi@git+https://evil.test/k.git"], "npm_registry": "` + reg.URL() + `"}`, 400, "not an npm package"},
		{"javascript", `{"javascript": ["takahe"], "npm_registry": "` + reg.URL() + `"}`, 400, "takahe"},
		{"javascript", `{"npm_registry": "` + reg.URL() + `"}`, 400, "needs dependencies.javascript"},
		{"python", `{"javascript": ["kiwi"], "npm_registry": "` + reg.URL() + `"}`, 400, "JavaScript programs"},
	} {
		resp, b := ts.do(t, "POST", "/v1/exec", "", strings.NewReader(fmt.Sprintf(`{"language": %q, "code": "1", "dependencies": %s}`, c.lang, c.deps)),
			"Content-Type", "application/json")
		if resp.StatusCode != c.status || !strings.Contains(string(b), c.want) {
			t.Errorf("%s: %d %s", c.deps, resp.StatusCode, b)
		}
	}
}
