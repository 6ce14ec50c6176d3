package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/codeagent/codeagent/sandbox"
)

// TestExecNetworkWithinCeiling: /v1/exec reaches what the server's
// ceiling allows, never more; the attempts are in the result and the audit
// log.
func TestExecNetworkWithinCeiling(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "from upstream") }))
	defer up.Close()
	addr := strings.TrimPrefix(up.URL, "http://")
	ts := newTestServer(t, testOptions{noModel: true, cfg: Config{EgressCeiling: []string{"*.example.test", "api.other.test:443"},
		EgressResolve: map[string]string{"data.example.test": addr}}})
	code := "import urllib.request\nprint(urllib.request.urlopen('http://data.example.test/x', timeout=10).read().decode())\n" +
		"try:\n    urllib.request.urlopen('http://evil.test/', timeout=10)\nexcept Exception as e:\n    print('refused', e)\n"
	var res sandbox.ResultJSON
	ts.json(t, "POST", "/v1/exec", "", map[string]any{"language": "python", "code": code,
		"network": map[string]any{"allow": []string{"data.example.test"}, "max_bytes": "1MiB"}}, http.StatusOK, &res)
	if !strings.Contains(res.Stdout, "from upstream") || !strings.Contains(res.Stdout, "refused HTTP Error 403") || res.Egress == nil ||
		len(res.Egress.Connections) != 2 || res.Egress.MaxBytes != 1<<20 {
		t.Fatalf("result %+v", res)
	}
	for _, c := range []struct {
		network map[string]any
		status  int
		want    string
	}{
		{map[string]any{"allow": []string{"example.test"}}, 403, "wider than this server's egress ceiling"},
		{map[string]any{"allow": []string{"api.other.test"}}, 403, "api.other.test"},
		{map[string]any{"allow": []string{"*"}}, 400, "network.allow"},
		{map[string]any{"allow": []string{"a.example.test"}, "max_bytes": "1TiB"}, 400, "byte budget of 1 TiB for the network is more than the maximum"},
		{map[string]any{"max_bytes": "1MiB"}, 400, "need a network"},
	} {
		resp, body := ts.do(t, "POST", "/v1/exec", "", strings.NewReader(fmt.Sprintf(`{"language": "python", "code": "print(1)", "network": %s}`, mustJSON(c.network))),
			"Content-Type", "application/json")
		if resp.StatusCode != c.status || !strings.Contains(string(body), c.want) {
			t.Errorf("%v: %d %s", c.network, resp.StatusCode, body)
		}
	}
	recs, err := ts.st.AuditLog(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	var audited, granted int
	for _, r := range recs {
		if r.Kind == "exec_end" && strings.Contains(string(r.Data), `"host":"evil.test"`) && strings.Contains(string(r.Data), `"allowed":false`) {
			audited++
		}
		if r.Kind == "exec_start" && strings.Contains(string(r.Data), `"allow":["data.example.test"]`) &&
			strings.Contains(string(r.Data), `"data.example.test":"`+addr+`"`) {
			granted++
		}
	}
	if audited != 1 || granted != 1 {
		t.Errorf("%d audit records of the refused connection, %d of the network granted", audited, granted)
	}
}

func TestExecNoNetworkByDefault(t *testing.T) {
	ts := newTestServer(t, testOptions{noModel: true})
	resp, body := ts.do(t, "POST", "/v1/exec", "", strings.NewReader(`{"language": "python", "code": "print(1)", "network": {"allow": ["pypi.org"]}}`),
		"Content-Type", "application/json")
	if resp.StatusCode != 403 || !strings.Contains(string(body), "network_not_allowed") || !strings.Contains(string(body), "allows no network") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func TestRunNetworkBeyondCeilingIsRefused(t *testing.T) {
	ts := newTestServer(t, testOptions{cfg: Config{EgressCeiling: []string{"pypi.org:443"}}})
	var sess struct{ ID string }
	ts.json(t, "POST", "/v1/sessions", "", map[string]any{"name": "net"}, http.StatusCreated, &sess)
	resp, body := ts.do(t, "POST", "/v1/sessions/"+sess.ID+"/runs", "",
		strings.NewReader(`{"task": "fetch", "network": {"allow": ["files.pythonhosted.org"]}}`), "Content-Type", "application/json")
	if resp.StatusCode != 403 || !strings.Contains(string(body), "files.pythonhosted.org is wider") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
}
