package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestExecLimitsValidated: out-of-range limits are a 400 naming the field
// (a huge millisecond timeout used to wrap around to 10 s, processes: 1 and
// memory: 65536 to be a 503 naming a host cgroup), and no answer shows a
// host path.
func TestExecLimitsValidated(t *testing.T) {
	ts := newTestServer(t, testOptions{})
	for _, c := range []struct {
		limits map[string]any
		field  string
	}{
		{map[string]any{"timeout": 9223372036854}, "limits.timeout"},
		{map[string]any{"timeout": 18446744083710}, "limits.timeout"}, // wrapped around to 10 s
		{map[string]any{"timeout": 1e300}, "limits.timeout"},
		{map[string]any{"timeout": "2562047h"}, "limits.timeout"},
		{map[string]any{"timeout": 1.5}, "limits.timeout"},
		{map[string]any{"cpu_time": "-1s"}, "limits.cpu_time"},
		{map[string]any{"processes": 1}, "limits.processes"},
		{map[string]any{"memory": 65536}, "limits.memory"},
		{map[string]any{"memory": 1e30}, "limits.memory"},
		{map[string]any{"open_files": 1}, "limits.open_files"},
		{map[string]any{"disk": "1KiB"}, "limits.disk"},
		{map[string]any{"cpus": 1000}, "limits.cpus"},
		{map[string]any{"swap": 1}, "limits.swap"},
	} {
		resp, b := ts.do(t, "POST", "/v1/exec", "", jsonBody(t, map[string]any{"language": "bash", "code": "echo", "limits": c.limits}),
			"Content-Type", "application/json")
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), c.field) || strings.Contains(string(b), "/sys/") {
			t.Errorf("limits %v: %d %s, want 400 naming %s", c.limits, resp.StatusCode, b, c.field)
		}
	}
	var res struct{ Status string }
	ts.json(t, "POST", "/v1/exec", "", map[string]any{"language": "bash", "code": "echo",
		"limits": map[string]any{"processes": 8, "memory": "32MiB", "timeout": 5000}}, 200, &res)
	if res.Status != "ok" {
		t.Errorf("limits in range: %s", res.Status)
	}
}

// TestDiskFullIs507: with the data directory's disk (and TMPDIR) full,
// an upload, a new session and an execution with files all answer 507
// saying the server's disk is full, never with a host path.
func TestDiskFullIs507(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs needs root")
	}
	data := t.TempDir()
	if err := unix.Mount("tmpfs", data, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size=4m,mode=0700"); err != nil {
		t.Skipf("mount a tmpfs: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(data, unix.MNT_DETACH) })
	t.Setenv("TMPDIR", data)
	ts := newTestServer(t, testOptions{data: data})
	sess := ts.createSession(t, "", "full")
	os.Remove(filepath.Join(data, "codeagent.db.reserve")) // as after a run used it
	f, _ := os.Create(filepath.Join(data, "filler"))
	for {
		if _, err := f.Write(make([]byte, 64<<10)); err != nil {
			break
		}
	}
	f.Close()
	check := func(what string, resp *http.Response, b []byte) {
		t.Helper()
		if resp.StatusCode != http.StatusInsufficientStorage || !strings.Contains(string(b), "the server's disk is full") || strings.Contains(string(b), data) {
			t.Errorf("%s on a full disk: %d %s", what, resp.StatusCode, b)
		}
	}
	resp, b := ts.upload(t, "", sess.ID, map[string]string{"big.csv": strings.Repeat("x", 256<<10)})
	check("upload", resp, b)
	resp, b = ts.do(t, "PUT", "/v1/sessions/"+sess.ID+"/files/raw.bin", "", bytes.NewReader(make([]byte, 256<<10)), "Content-Type", "application/octet-stream")
	check("raw upload", resp, b)
	resp, b = ts.do(t, "POST", "/v1/sessions", "", strings.NewReader(`{"name": "another"}`), "Content-Type", "application/json")
	check("new session", resp, b)
	resp, b = ts.do(t, "POST", "/v1/exec", "", jsonBody(t, map[string]any{"language": "bash", "code": "cat data.csv",
		"files": map[string]string{"data.csv": strings.Repeat("y", 512<<10)}}), "Content-Type", "application/json")
	check("exec with files", resp, b)
}

func jsonBody(t testing.TB, v any) *bytes.Reader {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.NewReader(b)
}
