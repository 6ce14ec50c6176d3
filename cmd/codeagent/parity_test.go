package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/sandbox/backends"
)

// recorder is a sandbox that runs nothing: it keeps the Spec each door
// hands it and answers ok.
type recorder struct {
	mu    sync.Mutex
	specs []sandbox.Spec
}

func (r *recorder) Run(_ context.Context, spec sandbox.Spec) (sandbox.Result, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.specs = append(r.specs, spec)
	return sandbox.Result{Status: sandbox.StatusOK}, nil
}
func (r *recorder) Close() error { return nil }

func (r *recorder) take(t *testing.T, door string) sandbox.Spec {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.specs) != 1 {
		t.Fatalf("%s: %d executions reached the sandbox, want 1", door, len(r.specs))
	}
	s := r.specs[0]
	r.specs = nil
	return s
}

// effective is what of a Spec the doors must agree on: the interpreter,
// the limits as the backend applies them, the environment and the network.
func effective(s sandbox.Spec) string {
	var net any
	if s.Network != nil {
		net = map[string]any{"allow": s.Network.Allow, "max_bytes": s.Network.MaxBytes}
	}
	b, _ := json.Marshal(map[string]any{"interpreter": s.Command[0], "limits": s.Limits.WithDefaults(), "env": s.Env, "network": net,
		"files": len(s.Files)})
	return string(b)
}

// TestDoorParity: the same one-shot execution through the command line,
// the HTTP API and MCP (at /mcp of the same server) reaches the sandbox as
// the same effective Spec (interpreter, limits, environment, network), and
// the same bad input is refused by each, as each door says it (exit 2, a
// 400, a tool error), before anything runs.
func TestDoorParity(t *testing.T) {
	rec := &recorder{}
	openBackend = func(string, backends.Options) (sandbox.Sandbox, error) { return rec, nil }
	t.Cleanup(func() { openBackend = backends.Open })
	base, _, _ := startServe(t, "--no-token", "--data-dir", t.TempDir())
	ctx, sess := connectServeMCP(t, base)

	code := "print(6 * 7)\n"
	type door struct {
		name string
		run  func(lang string, timeout, memoryMiB int) (ok bool, detail string)
	}
	doors := []door{
		{"cli", func(lang string, timeout, memoryMiB int) (bool, string) {
			args := []string{"exec", "--workdir", t.TempDir(), "--lang", lang}
			if timeout > 0 {
				args = append(args, "--timeout", fmt.Sprintf("%ds", timeout))
			}
			if memoryMiB > 0 {
				args = append(args, "--memory", fmt.Sprintf("%dMiB", memoryMiB))
			}
			c, out, errOut := runCLI(t, "", append(args, writeProgram(t, "p.txt", code))...)
			return c == 0, fmt.Sprintf("exit %d %s%s", c, out, errOut)
		}},
		{"http", func(lang string, timeout, memoryMiB int) (bool, string) {
			limits := map[string]any{}
			if timeout > 0 {
				limits["timeout"] = fmt.Sprintf("%ds", timeout)
			}
			if memoryMiB > 0 {
				limits["memory"] = fmt.Sprintf("%dMiB", memoryMiB)
			}
			body, _ := json.Marshal(map[string]any{"language": lang, "code": code, "limits": limits})
			st, b, _ := call(t, "POST", base+"/v1/exec", string(body))
			return st == http.StatusOK, fmt.Sprintf("%d %s", st, b)
		}},
		{"mcp", func(lang string, timeout, memoryMiB int) (bool, string) {
			limits := map[string]any{}
			if timeout > 0 {
				limits["timeout_seconds"] = timeout
			}
			if memoryMiB > 0 {
				limits["memory_mb"] = memoryMiB
			}
			res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: "execute_code",
				Arguments: map[string]any{"language": lang, "code": code, "limits": limits}})
			if err != nil {
				return false, err.Error()
			}
			b, _ := json.Marshal(res.Content)
			return !res.IsError, string(b)
		}},
	}
	for _, c := range []struct {
		lang               string
		timeout, memoryMiB int
	}{
		{"python", 0, 0},
		{"py", 5, 256},
		{"bash", 12, 0},
		{"javascript", 0, 512},
	} {
		var want, wantDoor string
		for _, d := range doors {
			if ok, detail := d.run(c.lang, c.timeout, c.memoryMiB); !ok {
				t.Errorf("%s %+v: refused: %s", d.name, c, detail)
				continue
			}
			got := effective(rec.take(t, d.name))
			if want == "" {
				want, wantDoor = got, d.name
			} else if got != want {
				t.Errorf("%+v: %s reached the sandbox as\n%s\nbut %s as\n%s", c, d.name, got, wantDoor, want)
			}
		}
	}
	for _, bad := range []struct {
		what               string
		lang               string
		timeout, memoryMiB int
	}{
		{"an unknown language", "cobol", 0, 0},
		{"memory below what a program needs", "python", 0, 1},
	} {
		for _, d := range doors {
			ok, detail := d.run(bad.lang, bad.timeout, bad.memoryMiB)
			if ok {
				t.Errorf("%s: %s was accepted: %s", d.name, bad.what, detail)
			}
			rec.mu.Lock()
			n := len(rec.specs)
			rec.specs = nil
			rec.mu.Unlock()
			if n != 0 {
				t.Errorf("%s: %s reached the sandbox", d.name, bad.what)
			}
			if d.name == "cli" && !strings.Contains(detail, "exit 2") {
				t.Errorf("cli: %s: %s, want exit 2", bad.what, detail)
			}
			if d.name == "http" && !strings.HasPrefix(detail, "400 ") {
				t.Errorf("http: %s: %s, want 400", bad.what, detail)
			}
		}
	}
}

// TestBackendFlagsAtEveryDoor: every command that opens a sandbox takes
// the backend's own flags (--image, the kubernetes backend's cluster
// settings) and hands them to the backend: run, mcp, repl and eval once
// took --backend but not these, so that a kubernetes backend there could
// not be pointed at a cluster or an image.
func TestBackendFlagsAtEveryDoor(t *testing.T) {
	var got []backends.Options
	openBackend = func(_ string, o backends.Options) (sandbox.Sandbox, error) {
		got = append(got, o)
		return nil, errors.New("stop here")
	}
	t.Cleanup(func() { openBackend = backends.Open })
	tasks := writeProgram(t, "tasks.jsonl", `{"task_id":"t/0","prompt":"def f():\n","entry_point":"f","test":"def check(c):\n    pass\n"}`+"\n")
	model := []string{"--base-url", "http://127.0.0.1:9/v1", "--model", "m"}
	flags := []string{"--backend", "docker", "--image", "img:test", "--kubeconfig", "/nonexistent/kc", "--namespace", "ns-test"}
	for _, c := range []struct {
		name string
		args []string
	}{
		{"exec", []string{"exec", "--workdir", t.TempDir(), "--lang", "python", writeProgram(t, "p.py", "print(1)\n")}},
		{"run", append([]string{"run", "--workdir", t.TempDir(), "--data-dir", t.TempDir()}, model...)},
		{"mcp", []string{"mcp", "--data-dir", t.TempDir()}},
		{"repl", []string{"repl", "--data-dir", t.TempDir()}},
		{"eval", append([]string{"eval", "--tasks", tasks, "--results", filepath.Join(t.TempDir(), "r.jsonl")}, model...)},
	} {
		got = nil
		args := append(append([]string{c.args[0]}, flags...), c.args[1:]...)
		if c.name == "run" {
			args = append(args, "say hi")
		}
		code, _, errOut := runCLI(t, "", args...)
		if len(got) != 1 {
			t.Errorf("%s: the backend was opened %d times (exit %d: %s)", c.name, len(got), code, errOut)
			continue
		}
		o := got[0]
		if o.Image != "img:test" || o.Kubernetes.Kubeconfig != "/nonexistent/kc" || o.Kubernetes.Namespace != "ns-test" {
			t.Errorf("%s: the backend got image %q, kubeconfig %q, namespace %q", c.name, o.Image, o.Kubernetes.Kubeconfig, o.Kubernetes.Namespace)
		}
	}
}

// refusal is how a door said no: whether it refused (exit 2, a 400, a tool
// error) and the message it gave.
type refusal struct {
	refused bool
	message string
}

// httpRefusal reads a 400's error message.
func httpRefusal(st int, body string) refusal {
	var e struct{ Error struct{ Message string } }
	if json.Unmarshal([]byte(body), &e) != nil || e.Error.Message == "" {
		return refusal{message: fmt.Sprintf("%d %s", st, body)}
	}
	return refusal{refused: st == http.StatusBadRequest, message: e.Error.Message}
}

// mcpRefusal reads a tool error's text.
func mcpRefusal(res *mcp.CallToolResult, err error) refusal {
	if err != nil {
		return refusal{message: err.Error()}
	}
	var text []string
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			text = append(text, t.Text)
		}
	}
	return refusal{refused: res.IsError, message: strings.Join(text, "\n")}
}

// checkRefusals: each door refused what, with want in its message, and
// nothing reached the sandbox.
func checkRefusals(t *testing.T, rec *recorder, what, want string, doors map[string]refusal) {
	t.Helper()
	for name, r := range doors {
		if !r.refused || !strings.Contains(r.message, want) {
			t.Errorf("%s: %s: refused %v with %q, want a refusal saying %q", name, what, r.refused, r.message, want)
		}
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.specs) != 0 {
		t.Errorf("%s reached the sandbox", what)
		rec.specs = nil
	}
}

// TestDoorParityRuns: the same bad run request through the command line
// (run), the HTTP API (a session's runs) and MCP (run_task at /mcp of the
// same server) is refused by each, as each door says it (exit 2, a 400, a
// tool error), with the same message (app.RunRequest.Validate), before
// anything runs: no program reaches the sandbox and no request the model.
func TestDoorParityRuns(t *testing.T) {
	rec := &recorder{}
	openBackend = func(string, backends.Options) (sandbox.Sandbox, error) { return rec, nil }
	t.Cleanup(func() { openBackend = backends.Open })
	model, flags := modelServer(t)
	base, _, _ := startServe(t, append([]string{"--no-token", "--data-dir", t.TempDir()}, flags...)...)
	ctx, sess := connectServeMCP(t, base)
	var session struct{ ID string }
	if st, b, _ := call(t, "POST", base+"/v1/sessions", `{"name": "parity"}`); st != http.StatusCreated || json.Unmarshal([]byte(b), &session) != nil {
		t.Fatalf("create a session: %d %s", st, b)
	}
	for _, c := range []struct {
		what string
		cli  []string       // run's flags
		args map[string]any // the HTTP request's and run_task's fields
		want string
	}{
		{"steps over the ceiling", []string{"--max-steps", "201"}, map[string]any{"max_steps": 201}, "max_steps 201: want 1 to 200"},
		{"iterations over the ceiling", []string{"--max-iterations", "101"}, map[string]any{"max_iterations": 101}, "max_iterations 101: want 1 to 100"},
		{"a bad mode", []string{"--mode", "tool"}, map[string]any{"mode": "tool"}, `mode "tool": want program, tools or auto`},
		{"a bad language", []string{"--lang", "cobol"}, map[string]any{"language": "cobol"}, `unknown language "cobol"`},
	} {
		doors := map[string]refusal{}
		args := append(append([]string{"run", "--data-dir", t.TempDir()}, flags...), c.cli...)
		code, _, errOut := runCLI(t, "", append(args, "sum the units")...)
		doors["cli"] = refusal{refused: code == exitUsage, message: errOut}
		body := map[string]any{"task": "sum the units"}
		maps.Copy(body, c.args)
		b, _ := json.Marshal(body)
		st, out, _ := call(t, "POST", base+"/v1/sessions/"+session.ID+"/runs", string(b))
		doors["http"] = httpRefusal(st, out)
		doors["mcp"] = mcpRefusal(sess.CallTool(ctx, &mcp.CallToolParams{Name: "run_task", Arguments: body}))
		checkRefusals(t, rec, c.what, c.want, doors)
	}
	if n := len(model.Requests()); n != 0 {
		t.Errorf("the model was asked %d times", n)
	}
}

// TestDoorParityCells: the same bad cell of a session's kept kernel
// through the HTTP API (a session's exec with state keep) and MCP
// (execute_code with keep_state) is refused by each, a 400 and a tool
// error, with the same message (app.CellRequest.Validate), before
// anything runs. The command line's cells (repl) are Python only, and its
// --timeout is refused when parsed, below the same least (app.MinLimits).
func TestDoorParityCells(t *testing.T) {
	rec := &recorder{}
	openBackend = func(string, backends.Options) (sandbox.Sandbox, error) { return rec, nil }
	t.Cleanup(func() { openBackend = backends.Open })
	base, _, _ := startServe(t, "--no-token", "--data-dir", t.TempDir())
	ctx, sess := connectServeMCP(t, base)
	var session struct{ ID string }
	if st, b, _ := call(t, "POST", base+"/v1/sessions", `{"name": "cells"}`); st != http.StatusCreated || json.Unmarshal([]byte(b), &session) != nil {
		t.Fatalf("create a session: %d %s", st, b)
	}
	for _, c := range []struct {
		what      string
		http, mcp map[string]any
		want      string
	}{
		{"keep state for bash", map[string]any{"language": "bash", "code": "echo", "state": "keep"},
			map[string]any{"language": "bash", "code": "echo", "keep_state": true}, "keep state runs Python only"},
		{"a timeout below the least", map[string]any{"language": "python", "code": "1", "state": "keep", "limits": map[string]any{"timeout": "1ms"}},
			map[string]any{"language": "python", "code": "1", "keep_state": true, "limits": map[string]any{"timeout_seconds": 0.001}},
			"limits.timeout: 1ms is below the least a program can start with, 10ms"},
		{"another limit", map[string]any{"language": "python", "code": "1", "state": "keep", "limits": map[string]any{"memory": "64MiB"}},
			map[string]any{"language": "python", "code": "1", "keep_state": true, "limits": map[string]any{"memory_mb": 64}},
			"with keep state only the timeout applies"},
		{"an empty cell", map[string]any{"language": "python", "code": " ", "state": "keep"},
			map[string]any{"language": "python", "code": " ", "keep_state": true}, "the cell is empty"},
	} {
		b, _ := json.Marshal(c.http)
		st, out, _ := call(t, "POST", base+"/v1/sessions/"+session.ID+"/exec", string(b))
		checkRefusals(t, rec, c.what, c.want, map[string]refusal{
			"http": httpRefusal(st, out),
			"mcp":  mcpRefusal(sess.CallTool(ctx, &mcp.CallToolParams{Name: "execute_code", Arguments: c.mcp})),
		})
	}
	if code, _, errOut := runCLI(t, "", "repl", "--timeout", "1ms"); code != exitUsage || !strings.Contains(errOut, "10ms") {
		t.Errorf("repl --timeout 1ms: exit %d, %s", code, errOut)
	}
}
