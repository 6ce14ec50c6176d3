package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/codeagent/codeagent/llm/llmtest"
	"github.com/codeagent/codeagent/sandbox"
)

// egressUpstream is an HTTP server on the host's loopback that the tests
// map a name to with --egress-resolve; it logs what reaches it.
func egressUpstream(t *testing.T) (addr string, seen func() []string) {
	var mu sync.Mutex
	var log []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		log = append(log, r.Host+r.URL.Path)
		mu.Unlock()
		fmt.Fprint(w, "rate=42")
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://"), func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), log...)
	}
}

const fetchBoth = `import urllib.request
print(urllib.request.urlopen("http://api.test/rate", timeout=10).read().decode())
try:
    urllib.request.urlopen("http://evil.test/steal", timeout=10)
except Exception as e:
    print("refused:", e)
`

func TestExecAllowHost(t *testing.T) {
	addr, seen := egressUpstream(t)
	prog := writeProgram(t, "fetch.py", fetchBoth)
	code, out, errOut := runCLI(t, "", "exec", "--allow-host", "api.test", "--egress-resolve", "api.test="+addr, prog)
	if code != 0 || !strings.Contains(out, "rate=42") || !strings.Contains(out, "refused: HTTP Error 403") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	if !strings.Contains(errOut, "codeagent: network: refused evil.test:80 (not in the allow list)") ||
		!strings.Contains(errOut, "--egress-resolve") {
		t.Errorf("stderr does not name the refused host or the override: %s", errOut)
	}
	code, out, _ = runCLI(t, "", "exec", "--json", "--allow-host", "api.test", "--egress-max-bytes", "1MiB",
		"--egress-resolve", "api.test="+addr, prog)
	var res sandbox.ResultJSON
	if err := json.Unmarshal([]byte(out), &res); code != 0 || err != nil || res.Egress == nil {
		t.Fatalf("exit %d, %v: %s", code, err, out)
	}
	e := res.Egress
	if len(e.Connections) != 2 || !e.Connections[0].Allowed || e.Connections[1].Allowed || e.Connections[1].Host != "evil.test" ||
		e.MaxBytes != 1<<20 || e.Resolve["api.test"] != addr || e.Connections[0].BytesIn == 0 {
		t.Errorf("egress %+v", e)
	}
	for _, s := range seen() {
		if strings.Contains(s, "evil") {
			t.Errorf("a refused request reached the upstream: %v", seen())
		}
	}
	// Without --allow-host there is no network at all.
	code, out, _ = runCLI(t, "", "exec", "--json", prog)
	var plain sandbox.ResultJSON
	if err := json.Unmarshal([]byte(out), &plain); err != nil || plain.Egress != nil || code == 0 {
		t.Errorf("no network: exit %d %s", code, out)
	}
}

func TestExecNetworkUsageErrors(t *testing.T) {
	prog := writeProgram(t, "p.py", "print(1)")
	dir := t.TempDir()
	withNet := filepath.Join(dir, "net.yaml")
	noNet := filepath.Join(dir, "nonet.yaml")
	_ = os.WriteFile(withNet, []byte("agent:\n  tools: [{name: execute_python}]\n  permissions:\n    network:\n      allow: [\"*.example.com:443\"]\n      max_bytes: 1MiB\n"), 0o644)
	_ = os.WriteFile(noNet, []byte("agent:\n  tools: [{name: execute_python}]\n"), 0o644)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--allow-host", "*"}, "may only start a name"},
		{[]string{"--allow-host", "10.0.0.1:99999"}, "port"},
		{[]string{"--egress-resolve", "a.test=127.0.0.1:80"}, "need a network"},
		{[]string{"--allow-host", "a.test", "--egress-resolve", "a.test"}, "NAME=ADDR:PORT"},
		{[]string{"--manifest", withNet, "--allow-host", "example.com"}, "example.com is wider than the manifest"},
		{[]string{"--manifest", withNet, "--allow-host", "api.example.com:80"}, "wider"},
		{[]string{"--manifest", withNet, "--egress-max-bytes", "2MiB"}, "more than the manifest's max_bytes"},
		{[]string{"--manifest", noNet, "--allow-host", "api.example.com"}, "allows no network"},
	} {
		code, _, errOut := runCLI(t, "", append(append([]string{"exec"}, tc.args...), prog)...)
		if code != exitUsage || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, code, errOut, tc.want)
		}
	}
	if code, _, errOut := runCLI(t, "", "exec", "--manifest", withNet, "--allow-host", "api.example.com:443", prog); code != 0 {
		t.Errorf("a host within the manifest: exit %d %s", code, errOut)
	}
}

// TestRunRefusedHostInFeedbackAndAudit: the model is told which host was
// refused, and the audit log records every attempt and the override.
func TestRunRefusedHostInFeedbackAndAudit(t *testing.T) {
	addr, _ := egressUpstream(t)
	first := "import urllib.request\nprint(urllib.request.urlopen('http://evil.test/rate', timeout=10).read().decode())\n"
	second := "import urllib.request\nprint(urllib.request.urlopen('http://api.test/rate', timeout=10).read().decode())\n"
	srv, flags := modelServer(t, pyAnswer(first), pyAnswer(second), llmtest.Say(`{"task_complete": true, "missing": ""}`))
	data := t.TempDir()
	args := append([]string{"run", "--data-dir", data, "--session", "net", "--json", "--allow-host", "api.test",
		"--egress-resolve", "api.test=" + addr}, flags...)
	code, out, errOut := runCLI(t, "", append(args, "fetch the rate from api.test")...)
	if code != 0 || !strings.Contains(out, "rate=42") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	reqs := srv.Requests()
	if len(reqs) < 2 || !strings.Contains(string(reqs[0].Body), "the network reaches only api.test") ||
		!strings.Contains(string(reqs[1].Body), "The network refused evil.test:80 (not in the allow list); programs may reach only api.test") {
		t.Fatalf("the model was not told: %d requests\n%s", len(reqs), reqs[len(reqs)-1].Body)
	}
	code, out, _ = runCLI(t, "", "log", "--data-dir", data, "--session", "net", "--json")
	var recs []struct {
		Kind string
		Data struct {
			Egress *sandbox.EgressJSON `json:"egress"`
		}
	}
	if err := json.Unmarshal([]byte(out), &recs); code != 0 || err != nil {
		t.Fatalf("log: %d %v", code, err)
	}
	var conns []sandbox.ConnectionJSON
	for _, r := range recs {
		if r.Kind == "exec_end" {
			if r.Data.Egress == nil || r.Data.Egress.Resolve["api.test"] != addr {
				t.Fatalf("exec_end record without the egress record: %+v", r.Data)
			}
			conns = append(conns, r.Data.Egress.Connections...)
		}
	}
	if len(conns) != 2 || conns[0].Host != "evil.test" || conns[0].Allowed || conns[1].Host != "api.test" || !conns[1].Allowed {
		t.Errorf("audited connections %+v", conns)
	}
}
