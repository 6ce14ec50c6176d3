package main

import (
	"database/sql"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/codeagent/codeagent/llm/llmtest"
)

// TestTwoTurnSession: the second turn of a session sees the first turn in
// its prompt and uses the file the first turn wrote, in the same workspace.
func TestTwoTurnSession(t *testing.T) {
	data := t.TempDir()
	srv, flags := modelServer(t,
		pyAnswer("import pandas as pd\npd.DataFrame({'region': ['north', 'south'], 'sales': [3, 5]}).to_csv('regions.csv', index=False)\nprint('wrote regions.csv')\n"),
		llmtest.Say(`{"task_complete": true, "missing": ""}`),
		pyAnswer("import pandas as pd\ndf = pd.read_csv('regions.csv')\nprint(df.groupby('region').sales.sum().to_dict())\n"),
		llmtest.Say(`{"task_complete": true, "missing": ""}`),
	)
	base := append([]string{"run", "--data-dir", data, "--session", "sales", "--json"}, flags...)
	code, out, errOut := runCLI(t, "", append(base, "make a table of sales by region")...)
	if code != 0 {
		t.Fatalf("turn 1: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, errOut = runCLI(t, "", append(base, "now break it down by region")...)
	if code != 0 {
		t.Fatalf("turn 2: exit %d\n%s\n%s", code, out, errOut)
	}
	var res struct{ Output string }
	json.Unmarshal([]byte(out), &res)
	if !strings.Contains(res.Output, "'north': 3") {
		t.Fatalf("turn 2 did not use turn 1's file: %q", res.Output)
	}
	reqs := srv.Requests()
	second := string(reqs[2].Body)
	if !strings.Contains(second, "Turn 1 (succeeded): make a table of sales by region") || !strings.Contains(second, "regions.csv") {
		t.Fatalf("turn 2's prompt lacks the session history:\n%s", second)
	}
	code, out, _ = runCLI(t, "", "sessions", "show", "sales", "--data-dir", data)
	if code != 0 || !strings.Contains(out, "turn 2 · succeeded") || !strings.Contains(out, "artifact: regions.csv") {
		t.Fatalf("sessions show: %d\n%s", code, out)
	}
	code, out, _ = runCLI(t, "", "stats", "--data-dir", data, "--session", "sales")
	if code != 0 || !strings.Contains(out, "tasks:              2 (2 succeeded") {
		t.Fatalf("stats: %d\n%s", code, out)
	}
	code, out, _ = runCLI(t, "", "log", "--data-dir", data, "--session", "sales", "--json")
	var recs []struct{ Kind string }
	if err := json.Unmarshal([]byte(out), &recs); code != 0 || err != nil {
		t.Fatalf("log: %d %v", code, err)
	}
	kinds := map[string]int{}
	for _, r := range recs {
		kinds[r.Kind]++
	}
	if kinds["generated"] != 2 || kinds["checked"] != 2 || kinds["executed"] != 2 || kinds["verified"] != 2 || kinds["done"] != 2 {
		t.Fatalf("audit kinds %v", kinds)
	}
	if code, out, _ := runCLI(t, "", "sessions", "rm", "sales", "--data-dir", data); code != 0 {
		t.Fatalf("rm: %d %s", code, out)
	}
	if _, err := os.Stat(sessionWorkspace(data, "sales")); !os.IsNotExist(err) {
		t.Fatal("the session's workspace survived rm")
	}
	if code, _, _ := runCLI(t, "", "sessions", "show", "sales", "--data-dir", data); code != exitUsage {
		t.Fatalf("show of a removed session: exit %d", code)
	}
}

// TestLogVerifyDetectsEdit edits one audit record behind codeagent's back.
func TestLogVerifyDetectsEdit(t *testing.T) {
	data := t.TempDir()
	_, flags := modelServer(t, pyAnswer("print(42)\n"), llmtest.Say(`{"task_complete": true, "missing": ""}`))
	if code, out, errOut := runCLI(t, "", append([]string{"run", "--data-dir", data, "--session", "v"}, append(flags, "print the answer")...)...); code != 0 {
		t.Fatalf("run: %d %s %s", code, out, errOut)
	}
	code, out, _ := runCLI(t, "", "log", "--verify", "--data-dir", data)
	// generated, checked, exec_start, exec_end, executed, verified, done
	if code != 0 || !strings.Contains(out, "audit log intact: 7 records") {
		t.Fatalf("verify: %d %s", code, out)
	}
	db, err := sql.Open("sqlite", filepath.Join(data, "codeagent.db"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE audit SET data = replace(data, '42', '43') WHERE kind = 'executed'`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	code, _, errOut := runCLI(t, "", "log", "--verify", "--data-dir", data)
	if code != exitFailure || !strings.Contains(errOut, "tampered with at record 5") {
		t.Fatalf("edited record: exit %d, %q", code, errOut)
	}
}

// TestRunManifest: the manifest's limits apply and a tool it does not list
// is refused before anything runs.
func TestRunManifest(t *testing.T) {
	dir := t.TempDir()
	m := filepath.Join(dir, "agent.yaml")
	os.WriteFile(m, []byte("agent:\n  tools:\n    - name: execute_python\n      timeout: 1\n  limits:\n    max_iterations: 2\n"), 0o644)
	spin := pyAnswer("import time\nwhile time.time() > 0:\n    pass\n")
	srv, flags := modelServer(t, spin, spin)
	code, out, _ := runCLI(t, "", append([]string{"run", "--manifest", m, "--json", "--no-verify"}, append(flags, "spin")...)...)
	var res struct {
		Attempts int
		History  []struct {
			ErrorClass string `json:"error_class"`
			Result     struct {
				WallMS int64 `json:"wall_ms"`
			}
		}
	}
	json.Unmarshal([]byte(out), &res)
	if code != exitFailure || res.Attempts != 2 || len(res.History) != 2 || res.History[0].ErrorClass != "timeout" || res.History[0].Result.WallMS > 5000 {
		t.Fatalf("exit %d, %+v", code, res)
	}
	before := len(srv.Requests())
	code, _, errOut := runCLI(t, "", append([]string{"run", "--manifest", m, "--lang", "bash"}, append(flags, "list files")...)...)
	if code != exitUsage || !strings.Contains(errOut, "execute_bash") {
		t.Fatalf("unlisted tool: exit %d, %q", code, errOut)
	}
	if len(srv.Requests()) != before {
		t.Fatal("the model was asked although the tool is refused")
	}
}

// TestRunKilled kills codeagent with SIGKILL in the middle of a session's
// run and checks that the store is intact and the session goes on.
func TestRunKilled(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "codeagent")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	data := t.TempDir()
	_, flags := modelServer(t,
		pyAnswer("import time\nprint('working', flush=True)\ntime.sleep(60)\n"),
		pyAnswer("print('second turn')\n"), llmtest.Say(`{"task_complete": true, "missing": ""}`))
	events := filepath.Join(t.TempDir(), "events.jsonl")
	cmd := exec.Command(bin, append([]string{"run", "--data-dir", data, "--session", "k", "--timeout", "120s", "--events", events}, append(flags, "work slowly")...)...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, _ := os.ReadFile(events)
		if strings.Contains(string(b), `"type":"checked"`) {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatal("the run never reached execution")
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // inside the sandbox now
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()

	// The chain is intact, but the execution under way has no end: the
	// log says so, naming the process that is gone.
	code, out, errOut := runCLI(t, "", "log", "--verify", "--data-dir", data)
	if code != exitFailure || !strings.Contains(errOut, "chain of its 3 records is intact") ||
		!strings.Contains(errOut, "execution 1 has no end record, and its process (pid "+strconv.Itoa(cmd.Process.Pid)) {
		t.Fatalf("verify after kill: %d %s %s", code, out, errOut)
	}
	code, out, errOut = runCLI(t, "", append([]string{"run", "--data-dir", data, "--session", "k", "--json"}, append(flags, "say something")...)...)
	if code != 0 {
		t.Fatalf("the next run failed: %d %s %s", code, out, errOut)
	}
	// The next run, holding the session, closed the dead run's record.
	code, out, errOut = runCLI(t, "", "log", "--verify", "--data-dir", data)
	if code != 0 || !strings.Contains(out, "audit log intact") || !strings.Contains(out, "the run was interrupted when its process died") {
		t.Fatalf("verify after the next run: %d %s %s", code, out, errOut)
	}
	code, out, _ = runCLI(t, "", "sessions", "show", "k", "--data-dir", data)
	if code != 0 || !strings.Contains(out, "turn 1 · interrupted") || !strings.Contains(out, "turn 2 · succeeded") {
		t.Fatalf("sessions show after kill: %d\n%s", code, out)
	}
}
