package main

import (
	"bufio"
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// serveProc is a real `codeagent serve` process.
type serveProc struct {
	cmd    *exec.Cmd
	base   string
	stderr *syncBuffer
	exited chan struct{}
}

// startServeBin starts the built binary's serve with TMPDIR tmp, without a
// token, and waits for its address.
func startServeBin(t testing.TB, tmp string, args ...string) *serveProc {
	t.Helper()
	cmd := exec.Command(mcpBinary(t), append([]string{"serve", "--addr", "127.0.0.1:0", "--no-token"}, args...)...)
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp, envAPIKeys+"=")
	p := &serveProc{cmd: cmd, stderr: &syncBuffer{}, exited: make(chan struct{})}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() { cmd.Process.Kill(); <-p.exited })
	re := regexp.MustCompile(`listening on (http://\S+:\d+)`)
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if m := re.FindStringSubmatch(p.stderr.String()); m != nil {
			p.base = m[1]
			return p
		}
		select {
		case <-p.exited:
			t.Fatalf("serve exited: %s", p.stderr.String())
		default:
		}
	}
	t.Fatalf("no address: %s", p.stderr.String())
	return nil
}

func (p *serveProc) json(t *testing.T, method, path, body string, out any) int {
	t.Helper()
	code, b, _ := call(t, method, p.base+path, body)
	if out != nil {
		json.Unmarshal([]byte(b), out)
	}
	return code
}

// run starts a run in session sid and returns its ID.
func (p *serveProc) run(t *testing.T, sid, task string) string {
	t.Helper()
	var r struct{ ID string }
	if code := p.json(t, "POST", "/v1/sessions/"+sid+"/runs", `{"task": "`+task+`", "verify": false}`, &r); code != http.StatusAccepted {
		t.Fatalf("start run: %d", code)
	}
	return r.ID
}

// waitEvents waits until run id has at least n events.
func (p *serveProc) waitEvents(t *testing.T, id string, n int) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		var v struct{ Events int }
		p.json(t, "GET", "/v1/runs/"+id, "", &v)
		if v.Events >= n {
			return
		}
	}
	t.Fatalf("run %s never had %d events: %s", id, n, p.stderr.String())
}

// sseEvents reads a run's event stream to its end and returns the event
// types with the done event's message.
func sseEvents(t *testing.T, url string) (types []string, doneMsg string) {
	resp, err := http.Get(url)
	if err != nil {
		t.Error(err)
		return nil, ""
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		if ev, ok := strings.CutPrefix(line, "event: "); ok {
			types = append(types, ev)
		}
		if d, ok := strings.CutPrefix(line, "data: "); ok && len(types) > 0 && types[len(types)-1] == "done" {
			var e struct{ Message string }
			json.Unmarshal([]byte(d), &e)
			doneMsg = e.Message
		}
	}
	return types, doneMsg
}

// TestServeSIGTERM: on SIGTERM the server stops accepting, refuses the
// execution waiting in its queue with 503, lets the one running finish,
// cancels the agent run with the shutdown as its recorded cause, sends
// done to the run's stream, and exits promptly; after a restart the run
// shows as canceled with that cause.
func TestServeSIGTERM(t *testing.T) {
	tmp, data := t.TempDir(), t.TempDir()
	_, flags := modelServer(t, pyAnswer("import time\ntime.sleep(60)\n"))
	p := startServeBin(t, tmp, append([]string{"--data-dir", data, "--workers", "2", "--queue", "4", "--warm", "0"}, flags...)...)
	var sess struct{ ID string }
	if code := p.json(t, "POST", "/v1/sessions", `{"name": "term"}`, &sess); code != 201 {
		t.Fatalf("session: %d", code)
	}
	rid := p.run(t, sess.ID, "sleep")
	stream := make(chan []string, 1)
	var doneMsg string
	go func() {
		types, msg := sseEvents(t, p.base+"/v1/runs/"+rid+"/events")
		doneMsg = msg
		stream <- types
	}()
	p.waitEvents(t, rid, 3) // attempt_start, generated, checked: the program runs next
	time.Sleep(500 * time.Millisecond)
	type answer struct {
		code int
		body string
	}
	exec := func(code string, ch chan answer) {
		resp, err := http.Post(p.base+"/v1/exec", "application/json", strings.NewReader(`{"language": "bash", "code": "`+code+`"}`))
		if err != nil {
			ch <- answer{0, err.Error()}
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		ch <- answer{resp.StatusCode, string(b)}
	}
	running, queued := make(chan answer, 1), make(chan answer, 1)
	go exec("sleep 2; echo finished", running)
	time.Sleep(500 * time.Millisecond)
	go exec("echo queued", queued)
	time.Sleep(300 * time.Millisecond)
	start := time.Now()
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case a := <-queued:
		if a.code != http.StatusServiceUnavailable || time.Since(start) > 1500*time.Millisecond {
			t.Errorf("the queued execution at shutdown: %d after %v: %s", a.code, time.Since(start), a.body)
		}
	case <-time.After(10 * time.Second):
		t.Error("no answer for the queued execution")
	}
	select {
	case a := <-running:
		if a.code != 200 || !strings.Contains(a.body, `"stdout":"finished\n"`) {
			t.Errorf("the running execution at shutdown: %d %s", a.code, a.body)
		}
	case <-time.After(20 * time.Second):
		t.Error("no answer for the running execution")
	}
	select {
	case types := <-stream:
		if len(types) == 0 || types[len(types)-1] != "done" || doneMsg != "canceled: the server is shutting down" {
			t.Errorf("the run's stream at shutdown: %v, done %q", types, doneMsg)
		}
	case <-time.After(20 * time.Second):
		t.Error("the run's stream did not end")
	}
	select {
	case <-p.exited:
		if d := time.Since(start); d > 15*time.Second {
			t.Errorf("exit after %v", d)
		}
		if c := p.cmd.ProcessState.ExitCode(); c != 0 {
			t.Errorf("exit %d: %s", c, p.stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not exit")
	}
	q := startServeBin(t, tmp, append([]string{"--data-dir", data, "--warm", "0"}, flags...)...)
	var v struct{ Status, Error string }
	if code := q.json(t, "GET", "/v1/runs/"+rid, "", &v); code != 200 || v.Status != "canceled" || v.Error != "canceled: the server is shutting down" {
		t.Errorf("the run after a restart: %d %+v", code, v)
	}
}

// leftovers lists what the process pid left: temporary workspaces, the
// namespace backend's directories and run cgroups, named with its tag; in
// tmp, which only the test's servers use, also what carries no tag.
func leftovers(t *testing.T, tmp string, pid int) []string {
	t.Helper()
	tag := strconv.Itoa(pid) + "."
	var out []string
	entries, _ := os.ReadDir(tmp)
	for _, e := range entries {
		name := e.Name()
		if !strings.HasPrefix(name, "codeagent-") {
			continue
		}
		rest := name[strings.Index(name[len("codeagent-"):], "-")+len("codeagent-")+1:]
		if strings.HasPrefix(rest, tag) || !regexp.MustCompile(`^\d+\.\d+\.[0-9a-f]{8}-`).MatchString(rest) {
			out = append(out, filepath.Join(tmp, name))
		}
	}
	for _, g := range []string{"/run/codeagent/codeagent-etc-" + tag + "*", "/run/codeagent/codeagent-mnt-" + tag + "*",
		"/var/tmp/codeagent/codeagent-etc-" + tag + "*", "/var/tmp/codeagent/codeagent-mnt-" + tag + "*"} {
		m, _ := filepath.Glob(g)
		out = append(out, m...)
	}
	filepath.WalkDir("/sys/fs/cgroup", func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if filepath.Base(filepath.Dir(path)) == "codeagent" && strings.HasPrefix(d.Name(), tag) {
			out = append(out, path)
		}
		if strings.Count(path, "/") > 8 {
			return fs.SkipDir
		}
		return nil
	})
	return out
}

// TestServeCrashRecovery kills a real server with SIGKILL in the middle of
// a run and an execution, and starts another on the same data directory:
// the finished run is still served (status, result, events), the killed
// one is interrupted, and what the dead process left (temporary
// workspaces, the backend's directories, cgroups) is gone, while a live
// server's files are left alone.
func TestServeCrashRecovery(t *testing.T) {
	tmp, data := t.TempDir(), t.TempDir()
	_, flags := modelServer(t, pyAnswer("print(42)\n"), pyAnswer("import time\ntime.sleep(60)\n"))
	args := append([]string{"--data-dir", data, "--workers", "2", "--warm", "1"}, flags...)
	p := startServeBin(t, tmp, args...)
	var sess struct{ ID string }
	p.json(t, "POST", "/v1/sessions", `{"name": "crash"}`, &sess)
	done := p.run(t, sess.ID, "print the answer")
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var v struct{ Status string }
		p.json(t, "GET", "/v1/runs/"+done, "", &v)
		if v.Status == "succeeded" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the first run: %+v", v)
		}
	}
	killed := p.run(t, sess.ID, "sleep")
	p.waitEvents(t, killed, 3)
	go http.Post(p.base+"/v1/exec", "application/json", strings.NewReader(`{"language": "bash", "code": "sleep 60"}`))
	time.Sleep(time.Second)
	pid := p.cmd.Process.Pid
	left := leftovers(t, tmp, pid)
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
	if !strings.Contains(strings.Join(left, " "), "codeagent-exec-") {
		t.Fatalf("the scenario left no temporary workspace: %v", left)
	}

	q := startServeBin(t, tmp, args...)
	// The new server sweeps in the background, as it starts serving.
	still := leftovers(t, tmp, pid)
	for deadline := time.Now().Add(10 * time.Second); len(still) > 0 && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
		still = leftovers(t, tmp, pid)
	}
	if len(still) > 0 {
		t.Errorf("left by the dead server 10 s after a restart: %v", still)
	}
	var v struct {
		Status string
		Events int
		Error  string
		Result *struct{ Output string }
	}
	if code := q.json(t, "GET", "/v1/runs/"+done, "", &v); code != 200 || v.Status != "succeeded" || v.Result == nil ||
		v.Result.Output != "42\n" || v.Events < 4 {
		t.Errorf("the finished run after a restart: %d %+v", code, v)
	}
	if types, _ := sseEvents(t, q.base+"/v1/runs/"+done+"/events"); len(types) < 4 || types[len(types)-1] != "done" {
		t.Errorf("the finished run's events after a restart: %v", types)
	}
	v.Result = nil
	if code := q.json(t, "GET", "/v1/runs/"+killed, "", &v); code != 200 || v.Status != "interrupted" {
		t.Errorf("the killed run after a restart: %d %+v", code, v)
	}
	if types, msg := sseEvents(t, q.base+"/v1/runs/"+killed+"/events"); len(types) != 1 || types[0] != "done" || msg == "" {
		t.Errorf("the killed run's stream: %v %q", types, msg)
	}
	var s struct {
		History []struct{ Status string }
	}
	q.json(t, "GET", "/v1/sessions/"+sess.ID, "", &s)
	if len(s.History) != 2 || s.History[1].Status != "interrupted" {
		t.Errorf("turns after a restart: %+v", s.History)
	}

	// A third server starting beside the live second leaves its files.
	mine := leftovers(t, tmp, q.cmd.Process.Pid)
	if len(mine) == 0 {
		t.Fatal("the live server has no files to check")
	}
	startServeBin(t, tmp, args...)
	for _, f := range mine {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("a new server removed a live one's %s", f)
		}
	}
}
