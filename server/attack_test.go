package server

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/codeagent/codeagent/llm/llmtest"
	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/sandbox/sandboxtest"
	"github.com/codeagent/codeagent/workspace"
)

// Attacks on the server's workspaces by links that a real sandboxed
// program plants: in a data directory that was some run's workspace, and in
// the temporary directory of /v1/exec. The host directory is checked after.

// plant runs code in the sandbox with dir as its workspace, as
// `codeagent exec --workdir dir` would.
func plant(t *testing.T, sb sandbox.Sandbox, dir, code string) {
	t.Helper()
	ws, err := workspace.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	res, err := sb.Run(context.Background(), sandbox.Spec{Command: []string{"python3", "/code/plant.py"}, Workspace: ws.Dir,
		Files: []sandbox.File{{Path: "/code/plant.py", Data: []byte(code)}}, Limits: sandbox.DefaultLimits()})
	if err != nil || res.Status != sandbox.StatusOK {
		t.Fatalf("plant: %v %v\n%s%s", err, res.Status, res.Stdout, res.Stderr)
	}
}

const pwnProgram = `open("authorized_keys", "w").write("ssh-ed25519 AAAA attacker\n")
print("wrote authorized_keys")
`

func wantRefused(t *testing.T, what string, resp *http.Response, body []byte) {
	t.Helper()
	if resp.StatusCode != http.StatusConflict || !strings.Contains(string(body), "symlink_refused") {
		t.Errorf("%s: status %d, want 409 symlink_refused: %s", what, resp.StatusCode, body)
	}
	if strings.Contains(string(body), "the-owner") {
		t.Errorf("%s served the host file: %s", what, body)
	}
}

func TestServeAttackSessionWorkspaceReplacedByLink(t *testing.T) {
	ts := newTestServer(t, testOptions{replies: []llmtest.Reply{pyReply(pwnProgram)}})
	host, before := sandboxtest.HostDir(t)
	s := ts.createSession(t, "", "victim")
	if resp, b := ts.upload(t, "", s.ID, map[string]string{"a.csv": "a\n1\n"}); resp.StatusCode != http.StatusCreated {
		t.Fatalf("upload: %d %s", resp.StatusCode, b)
	}
	// Between turns, a program whose workspace holds the data directory
	// replaces the session's workspace with a link to the host directory.
	sessionDir := filepath.Dir(ts.srv.workspaceDir(Anonymous, s.ID))
	plant(t, ts.sb, sessionDir, fmt.Sprintf("import os\nos.rename('workspace', 'old')\nos.symlink(%q, 'workspace')\n", host))

	resp, b := ts.do(t, "GET", "/v1/sessions/"+s.ID+"/files", "", nil)
	wantRefused(t, "list", resp, b)
	resp, b = ts.do(t, "GET", "/v1/sessions/"+s.ID+"/files/authorized_keys", "", nil)
	wantRefused(t, "download", resp, b)
	resp, b = ts.do(t, "PUT", "/v1/sessions/"+s.ID+"/files/authorized_keys", "", strings.NewReader("ssh-ed25519 AAAA attacker\n"))
	wantRefused(t, "upload", resp, b)
	var r runJSON
	ts.json(t, "POST", "/v1/sessions/"+s.ID+"/runs", "", map[string]any{"task": "write a file", "verify": false}, http.StatusAccepted, &r)
	if r = ts.waitRun(t, "", r.ID); r.Status == runSucceeded || !strings.Contains(r.Error, "symbolic link") {
		t.Errorf("run: %s %q, want a failure naming the link", r.Status, r.Error)
	}
	sandboxtest.CheckHost(t, host, before)
}

func TestServeAttackDataDirWithPlantedLink(t *testing.T) {
	ts := newTestServer(t, testOptions{})
	host, before := sandboxtest.HostDir(t)
	// The data directory was once a run's workspace, and its program left
	// the server's directory as a link to the host.
	plant(t, ts.sb, ts.data, fmt.Sprintf("import os\nos.symlink(%q, 'server')\n", host))
	resp, b := ts.do(t, "POST", "/v1/sessions", "", strings.NewReader(`{"name": "s"}`), "Content-Type", "application/json")
	wantRefused(t, "create session", resp, b)
	sandboxtest.CheckHost(t, host, before)
}

func TestServeAttackExecTempDirThroughPlantedLink(t *testing.T) {
	ts := newTestServer(t, testOptions{})
	host, before := sandboxtest.HostDir(t)
	w := filepath.Join(t.TempDir(), "w")
	plant(t, ts.sb, w, fmt.Sprintf("import os\nos.symlink(%q, 'tmp')\n", host))
	t.Setenv("TMPDIR", filepath.Join(w, "tmp"))
	body := `{"language": "python", "code": "open('/workspace/../workspace/x', 'w').write('x')"}`
	resp, b := ts.do(t, "POST", "/v1/exec", "", strings.NewReader(body), "Content-Type", "application/json")
	wantRefused(t, "exec", resp, b)
	sandboxtest.CheckHost(t, host, before)
}

// A download follows no link at any component of its path, not even one
// that stays inside the workspace.
func TestServeDownloadFollowsNoLink(t *testing.T) {
	ts := newTestServer(t, testOptions{})
	s := ts.createSession(t, "", "links")
	plant(t, ts.sb, ts.srv.workspaceDir(Anonymous, s.ID), "import os\nos.mkdir('real')\nopen('real/x.txt', 'w').write('inside')\nos.symlink('real', 'inner')\n")
	if resp, b := ts.do(t, "GET", "/v1/sessions/"+s.ID+"/files/real/x.txt", "", nil); resp.StatusCode != 200 || string(b) != "inside" {
		t.Fatalf("plain download: %d %s", resp.StatusCode, b)
	}
	if resp, b := ts.do(t, "GET", "/v1/sessions/"+s.ID+"/files/inner/x.txt", "", nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("download through a link: %d %s, want 404", resp.StatusCode, b)
	}
}
