package agent

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/codeagent/codeagent/llm"
	"github.com/codeagent/codeagent/llm/llmtest"
	"github.com/codeagent/codeagent/sandbox"
)

var toolCall = llmtest.ToolCall

func pyCall(code string) llm.ToolCall {
	return toolCall("execute_python", map[string]string{"code": code})
}

// calls is a model answer calling tools, in order.
func calls(cs ...llm.ToolCall) llmtest.Reply { return llmtest.Call(cs...) }

// steps are the tool calls of a run, over its rounds.
func steps(res *Result) []Step {
	var out []Step
	for _, a := range res.History {
		out = append(out, a.Steps...)
	}
	return out
}

func stepClasses(res *Result) []ErrorClass {
	var out []ErrorClass
	for _, s := range steps(res) {
		out = append(out, s.ErrorClass)
	}
	return out
}

func codeOf(s Step) string {
	var a struct{ Code string }
	_ = json.Unmarshal(s.Arguments, &a)
	return a.Code
}

// offered names the tools a request offered, in either protocol.
func offered(r llmtest.Request) []string {
	var names []string
	tools, _ := r.JSON["tools"].([]any)
	for _, t := range tools {
		m, _ := t.(map[string]any)
		if f, ok := m["function"].(map[string]any); ok {
			m = f
		}
		n, _ := m["name"].(string)
		names = append(names, n)
	}
	return names
}

// logRun shows a run's rounds and steps, for a failing test.
func logRun(t *testing.T, res *Result) {
	t.Helper()
	for _, a := range res.History {
		t.Logf("round %d: %s", a.N, a.ErrorClass)
		for _, s := range a.Steps {
			t.Logf("  step %d %s %s: %s", s.N, s.Tool, s.ErrorClass, s.Output)
		}
	}
	t.Logf("failures: %q", res.Message)
}

func eventTypes(events []Event) string {
	var types []string
	for _, e := range events {
		types = append(types, string(e.Type))
	}
	return strings.Join(types, " ")
}

const analysisCell = `import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

df["revenue"] = df["units"] * df["unit_price"]
top = df.groupby("product")["revenue"].sum().sort_values(ascending=False).head(5)
print("Top 5 products by revenue:")
for name, rev in top.items():
    print(f"{name}: {rev:.2f}")
df["date"] = pd.to_datetime(df["date"])
monthly = df.set_index("date")["revenue"].resample("M").sum()
ax = monthly.plot(marker="o", title="Monthly revenue")
plt.tight_layout()
plt.savefig("revenue_trend.png")
plt.close("all")
print("Saved revenue_trend.png")
`

const columnList = "['date', 'product', 'units', 'unit_price']"

// The seed trajectory as tool calls, on both protocols: NameError (no
// DataFrame yet),
// FileNotFoundError, the CSV loaded (once), KeyError, the columns printed,
// an end judged incomplete, then the answer on the DataFrame kept in the
// kernel; the successful cells replay in a fresh sandbox.
func TestToolModeSeedTrajectory(t *testing.T) {
	// The plot the task names is missing after round 1: said before any
	// verifier is asked.
	const missing = "the task names files the calls did not write: revenue_trend.png"
	for _, w := range wires {
		t.Run(w.name, func(t *testing.T) {
			a, srv, ws, events := setupWire(t, w, Config{Mode: ModeTools, Verify: true, Limits: sandbox.Limits{Memory: 512 << 20}},
				map[string]string{"sales.csv": salesCSV},
				calls(pyCall("print(df.head())\n")),
				calls(pyCall("import pandas as pd\n\ndf = pd.read_csv(\"sales_data.csv\")\n")),
				calls(pyCall("import pandas as pd\n\ndf = pd.read_csv(\"sales.csv\")\nprint(len(df), \"rows loaded\")\n")),
				calls(pyCall("df[\"revenue\"] = df[\"quantity\"] * df[\"price\"]\n")),
				calls(pyCall("print(list(df.columns))\n")),
				llmtest.Say("The data has the columns date, product, units and unit_price."),
				llmtest.Reply{Func: func(req llmtest.Request) llmtest.Reply {
					// The model uses the columns it saw; without them it
					// would look again.
					if strings.Contains(req.Text(), columnList) && strings.Contains(req.Text(), missing) {
						return calls(pyCall(analysisCell))
					}
					return calls(pyCall("print(list(df.columns))\n"))
				}},
				llmtest.Say("Done: the top 5 products are printed and the plot is saved."),
				judge,
			)
			res, err := a.Run(context.Background(), Task{Prompt: "Analyze sales.csv: top 5 products by revenue, plot the monthly trend, save it as revenue_trend.png", Workspace: ws})
			if err != nil {
				logRun(t, res)
				t.Fatal(err)
			}
			if !res.Success || res.Mode != ModeTools || res.Attempts != 2 {
				t.Fatalf("success %v, mode %s, %d rounds (%s); steps %q", res.Success, res.Mode, res.Attempts, res.Message, stepClasses(res))
			}
			if got := stepClasses(res); len(got) != 6 || got[0] != ClassName || got[1] != ClassFile || got[2] != ClassNone ||
				got[3] != ClassValue || got[4] != ClassNone || got[5] != ClassNone {
				t.Errorf("step classes = %q", got)
			}
			// State kept: the CSV was read by one cell, once, and every
			// later cell ran in the same kernel on its DataFrame.
			loads := 0
			for i, s := range steps(res) {
				if strings.Contains(codeOf(s), `read_csv("sales.csv")`) {
					loads++
				}
				if s.ExecutionCount != i+1 {
					t.Errorf("step %d ran as cell %d of its kernel", s.N, s.ExecutionCount)
				}
			}
			if loads != 1 || strings.Count(res.Code, `read_csv("sales.csv")`) != 1 {
				t.Errorf("the CSV was loaded by %d cells; the program:\n%s", loads, res.Code)
			}
			mustContain(t, "program", res.Code, "print(list(df.columns))", "plt.savefig(\"revenue_trend.png\")")
			if strings.Contains(res.Code, "sales_data.csv") || strings.Contains(res.Code, "quantity") {
				t.Errorf("failed cells are in the program:\n%s", res.Code)
			}
			mustContain(t, "output", res.Output, "9 rows loaded", columnList, "Thingamajig: 60.00", "Saved revenue_trend.png")
			if h := res.History[1]; h.Replay == nil || h.Replay.Status != "ok" || h.Verdict == nil || !h.Verdict.TaskComplete {
				t.Errorf("round 2 = %+v", h)
			}
			if b, err := os.ReadFile(filepath.Join(ws.Dir, ".codeagent", "solution.py")); err != nil || string(b) != res.Code {
				t.Errorf("solution.py: %v", err)
			}
			if len(res.Artifacts) != 1 || res.Artifacts[0].Path != "revenue_trend.png" {
				t.Errorf("artifacts = %+v", res.Artifacts)
			}

			reqs := srv.Requests()
			if len(reqs) != 9 {
				t.Fatalf("%d requests, want 9", len(reqs))
			}
			if got := strings.Join(offered(reqs[0]), " "); got != "execute_python execute_javascript execute_bash list_files read_file write_file" {
				t.Errorf("tools offered: %s", got)
			}
			if !strings.Contains(string(reqs[0].Body), `"required":["code"]`) {
				t.Errorf("execute_python's schema does not require code: %s", reqs[0].Body)
			}
			mustContain(t, "first request", reqs[0].Text(), "execute_python", "one Python kernel", "sales.csv (", "| date,product,units,unit_price")
			mustContain(t, "second request", reqs[1].Text(), "NameError", "name 'df' is not defined")
			mustContain(t, "third request", reqs[2].Text(), "FileNotFoundError", "sales_data.csv")
			mustContain(t, "after the end", reqs[6].Text(), "What is missing: "+missing, columnList)
			mustContain(t, "final verification", reqs[8].Text(), "Top 5 products by revenue:", "revenue_trend.png (")

			types := eventTypes(*events)
			if strings.Count(types, "tool_call") != 6 || strings.Count(types, "tool_result") != 6 || strings.Count(types, "replayed") != 1 ||
				!strings.HasPrefix(types, "attempt_start generated tool_call checked executed tool_result") || !strings.HasSuffix(types, "verified replayed done") {
				t.Errorf("events: %s", types)
			}
			if first := (*events)[0]; first.Mode != ModeTools || first.MaxSteps != DefaultMaxSteps {
				t.Errorf("first event = %+v", first)
			}
		})
	}
}

// A call to a tool the manifest does not list, or to no tool at all, or
// with arguments that do not validate, is answered with an error and
// never runs; parallel calls are honoured in order.
func TestToolModeRefusesBadCallsAndRunsParallelCallsInOrder(t *testing.T) {
	for _, w := range wires {
		t.Run(w.name, func(t *testing.T) {
			a, srv, ws, events := setupWire(t, w, Config{Mode: ModeTools, Tools: map[string]sandbox.Limits{"execute_python": {}}}, nil,
				calls(
					toolCall("execute_bash", map[string]string{"code": "echo pwned > pwned.txt"}),
					toolCall("run_shell", map[string]string{"cmd": "ls"}),
					llm.ToolCall{Name: "execute_python", Arguments: json.RawMessage(`{"code": 5}`)},
					llm.ToolCall{Name: "execute_python", Arguments: json.RawMessage(`{"cod": "print(1)"}`)},
					llm.ToolCall{Name: "execute_python", Arguments: json.RawMessage(`print(1)`)},
					toolCall("read_file", map[string]string{"path": "../etc/passwd"}),
				),
				calls(
					pyCall("x = 1\n"),
					pyCall("x += 1\n"),
					toolCall("write_file", map[string]string{"path": "notes/a.txt", "content": "hello"}),
					toolCall("list_files", map[string]string{}),
					toolCall("read_file", map[string]string{"path": "notes/a.txt"}),
					pyCall("from pathlib import Path\n\nPath('notes').mkdir(exist_ok=True)\nPath('notes/a.txt').write_text('hello')\nprint('x is', x)\n"),
				),
				llmtest.Say("x is 2."),
			)
			res, err := a.Run(context.Background(), Task{Prompt: "count to two", Workspace: ws})
			if err != nil {
				logRun(t, res)
				t.Fatal(err)
			}
			if !res.Success || res.Output != "x is 2\n" {
				t.Fatalf("success %v, output %q (%s)", res.Success, res.Output, res.Message)
			}
			st := steps(res)
			if len(st) != 12 {
				t.Fatalf("%d steps, want 12", len(st))
			}
			for i := 0; i < 6; i++ {
				if !st[i].Refused || st[i].Result != nil {
					t.Errorf("step %d (%s) was not refused: %+v", i+1, st[i].Tool, st[i])
				}
			}
			for i, want := range []string{"execute_bash is not offered here (the manifest does not list it)", `there is no tool named "run_shell"`,
				`the argument "code" must be a string`, `unknown argument(s) cod`, "not a JSON object", "leaves the working directory"} {
				mustContain(t, "refusal", st[i].Output, want)
			}
			if _, err := os.Stat(filepath.Join(ws.Dir, "pwned.txt")); err == nil {
				t.Error("the unlisted tool ran")
			}
			if got := strings.Join(offered(srv.Requests()[0]), " "); got != "execute_python list_files read_file write_file" {
				t.Errorf("tools offered: %s", got)
			}
			mustContain(t, "list_files", st[9].Output, "notes/a.txt (5 bytes)")
			if st[10].Output != "hello" || st[8].Output != "wrote 5 bytes to notes/a.txt" {
				t.Errorf("read_file %q, write_file %q", st[10].Output, st[8].Output)
			}
			// The second answer's tool results come back in call order.
			text := srv.Requests()[2].Text()
			if i, j := strings.Index(text, "wrote 5 bytes"), strings.Index(text, "x is 2"); i < 0 || j < i {
				t.Errorf("tool results out of order:\n%s", text)
			}
			executed := 0
			for _, e := range *events {
				if e.Type == EventExecuted && e.Phase == PhaseTool {
					executed++
				}
			}
			if executed != 3 {
				t.Errorf("%d executions, want the 3 valid execute_python calls", executed)
			}
			if !strings.HasPrefix(res.Code, "# Assembled by codeagent from the cells that succeeded, in order.\nx = 1\n\nx += 1\n\nfrom pathlib") {
				t.Errorf("program:\n%s", res.Code)
			}
		})
	}
}

// Static findings come back as the tool result with their hints, and the
// code does not run.
func TestToolModeChecksEveryCall(t *testing.T) {
	a, _, ws, _ := setup(t, Config{Mode: ModeTools}, nil,
		calls(pyCall("import subprocess\nsubprocess.run(['ls'])\n")),
		calls(pyCall("print(sum(range(10)))\n")),
		llmtest.Say("Listed."),
	)
	res, err := a.Run(context.Background(), Task{Prompt: "list the files here", Workspace: ws})
	if err != nil || !res.Success {
		t.Fatalf("err %v, res %+v", err, res)
	}
	st := steps(res)
	if !st[0].Refused || st[0].ErrorClass != ClassSafety || len(st[0].Check) == 0 || st[0].Result != nil {
		t.Errorf("step 1 = %+v", st[0])
	}
	mustContain(t, "findings", st[0].Output, "not run: the static checker rejected", "forbidden-import", "fix: ")
}

// A model that never stops calling tools runs out of its step budget: a
// clear failure, and nothing beyond the budget runs.
func TestToolModeStepBudget(t *testing.T) {
	loop := calls(pyCall("print('again')\n"))
	a, srv, ws, events := setup(t, Config{Mode: ModeTools, MaxSteps: 3}, nil, loop, loop, loop, loop)
	res, err := a.Run(context.Background(), Task{Prompt: "print again", Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	if res.Success || !strings.Contains(res.Message, "all 3 tool calls") || len(steps(res)) != 3 {
		t.Fatalf("success %v, message %q, %d steps", res.Success, res.Message, len(steps(res)))
	}
	mustContain(t, "last request", srv.Requests()[3].Text(), "That was the last tool call of the budget of 3")
	if n := strings.Count(eventTypes(*events), "executed"); n != 3 {
		t.Errorf("%d executions, want 3", n)
	}
}

// A replay that does not reproduce goes back to the model: here a cell
// depends on a file written with write_file, then on chance; the kernel
// restarts and the model does it again, standing alone.
func TestToolModeReplayMustReproduce(t *testing.T) {
	a, srv, ws, _ := setup(t, Config{Mode: ModeTools}, nil,
		calls(toolCall("write_file", map[string]string{"path": "params.json", "content": `{"n": 7}`})),
		calls(pyCall("import json\nn = json.load(open('params.json'))['n']\nprint('n =', n)\n")),
		llmtest.Say("n is 7."),
		calls(pyCall("import random\nn = random.randint(0, 10**9)\nprint('n =', n)\n")),
		llmtest.Say("n is printed."),
		llmtest.Reply{Func: func(req llmtest.Request) llmtest.Reply {
			if strings.Contains(req.Text(), "The kernel has been restarted") {
				return calls(pyCall("import json\nwith open('params.json', 'w') as f:\n    json.dump({'n': 7}, f)\nn = json.load(open('params.json'))['n']\nprint('n =', n)\n"))
			}
			return llmtest.Say("?")
		}},
		llmtest.Say("n is 7."),
	)
	res, err := a.Run(context.Background(), Task{Prompt: "print n from params.json, which holds {\"n\": 7}", Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Success || res.Attempts != 3 || res.Output != "n = 7\n" {
		t.Fatalf("success %v after %d rounds, output %q (%s)", res.Success, res.Attempts, res.Output, res.Message)
	}
	wantClasses(t, res.History, ClassReplay, ClassReplay, ClassNone)
	reqs := srv.Requests()
	mustContain(t, "first replay", reqs[3].Text(), "did not reproduce", "FileNotFoundError", "it did not create params.json, which you wrote with write_file")
	mustContain(t, "second replay", reqs[5].Text(), "its output differs from what the cells printed at line 1")
	if strings.Contains(res.Code, "random") || strings.Count(res.Code, "print(") != 1 {
		t.Errorf("the program holds cells from before the restart:\n%s", res.Code)
	}
	// Each replay difference is one more step.
	if n := len(steps(res)); n != 4 {
		t.Errorf("%d tool calls", n)
	}
}

// In auto mode a server that rejects tools falls back to program mode,
// and the answer it gave without them is the first attempt; tools are not
// sent again.
func TestAutoModeFallsBackToProgramMode(t *testing.T) {
	for _, w := range wires {
		t.Run(w.name, func(t *testing.T) {
			a, srv, ws, events := setupWire(t, w, Config{Mode: ModeAuto, Verify: true}, nil,
				llmtest.Fail(400, "this model does not support tools"),
				py("print(sum(range(1, 101)))\n"),
				verdict(true, ""),
			)
			res, err := a.Run(context.Background(), Task{Prompt: "print the sum of 1..100", Workspace: ws})
			if err != nil {
				t.Fatal(err)
			}
			if !res.Success || res.Mode != ModeProgram || res.Attempts != 1 || res.Output != "5050\n" {
				t.Fatalf("success %v, mode %s, attempts %d, output %q (%s)", res.Success, res.Mode, res.Attempts, res.Output, res.Message)
			}
			reqs := srv.Requests()
			if len(reqs) != 3 || reqs[0].JSON["tools"] == nil || reqs[1].JSON["tools"] != nil || reqs[2].JSON["tools"] != nil {
				t.Fatalf("%d requests; tools: %v", len(reqs), offered(reqs[0]))
			}
			if types := eventTypes(*events); !strings.HasPrefix(types, "attempt_start generated checked executed verified done") {
				t.Errorf("events: %s", types)
			}
		})
	}
	t.Run("model_calls_no_tool", func(t *testing.T) {
		a, srv, ws, _ := setup(t, Config{Mode: ModeAuto}, nil, llmtest.Say("No tools for me."), py("print(42)\n"))
		res, err := a.Run(context.Background(), Task{Prompt: "print 42", Workspace: ws})
		if err != nil || !res.Success || res.Mode != ModeProgram || res.Output != "42\n" {
			t.Fatalf("err %v, res %+v", err, res)
		}
		if reqs := srv.Requests(); len(reqs) != 2 || reqs[1].JSON["tools"] != nil {
			t.Errorf("%d requests", len(reqs))
		}
	})
	t.Run("tools_mode_on_such_a_server_fails_clearly", func(t *testing.T) {
		a, _, ws, _ := setup(t, Config{Mode: ModeTools}, nil, llmtest.Fail(400, "tools are not supported"), llmtest.Say("plain"))
		res, err := a.Run(context.Background(), Task{Prompt: "x", Workspace: ws})
		if err != nil || res.Success || !strings.Contains(res.Message, "does not accept tool definitions") {
			t.Fatalf("err %v, res %+v", err, res)
		}
	})
}

func TestToolModeConfig(t *testing.T) {
	sb, p := &fakeSandbox{}, llmtest.NewFake()
	for _, cfg := range []Config{
		{Mode: "tool"},
		{Mode: ModeTools, MaxSteps: -1},
		{Mode: ModeTools, MaxSteps: 201},
		{Mode: ModeTools, Tools: map[string]sandbox.Limits{"execute_ruby": {}}},
		{Mode: ModeTools, Tools: map[string]sandbox.Limits{"execute_bash": {}}},
		{Mode: ModeTools, Tests: true},
		{Mode: ModeTools, Network: &sandbox.Network{Allow: []string{"example.com"}}},
	} {
		if _, err := New(cfg, Deps{Provider: p, Sandbox: sb, Checker: checker(t)}); err == nil {
			t.Errorf("New(%+v) accepted", cfg)
		}
	}
	a, err := New(Config{Mode: ModeAuto, Tests: true}, Deps{Provider: p, Sandbox: sb, Checker: checker(t)})
	if err != nil || a.modeFor(Task{}) != ModeProgram {
		t.Errorf("auto with tests: %v", err)
	}
}

// A model that never calls a tool in tool mode fails with a message that
// suggests program mode (it ended without saying what might work).
func TestToolModeWithoutToolCallsSuggestsProgramMode(t *testing.T) {
	talk := llmtest.Say("The answer is 42.")
	a, _, ws, _ := setup(t, Config{Mode: ModeTools, MaxIterations: 2, Verify: false}, nil, talk, talk, talk, talk)
	res, err := a.Run(context.Background(), Task{Prompt: "compute the answer", Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	if res.Success || !strings.Contains(res.Message, "--mode program") {
		t.Fatalf("success %v, message %q", res.Success, res.Message)
	}
}

// In tool mode too, a file the task names that the calls did not write
// makes the round incomplete, fed back before any verifier is asked.
func TestToolModeChecksDeliverables(t *testing.T) {
	a, srv, ws, _ := setup(t, Config{Mode: ModeTools, Verify: true}, nil,
		calls(pyCall("print(6 * 7)\n")),
		llmtest.Say("Done."),
		calls(pyCall("open('answer.txt', 'w').write(str(6 * 7))\n")),
		llmtest.Say("Saved."),
		llmtest.Say(`{"task_complete": true, "missing": ""}`),
	)
	res, err := a.Run(context.Background(), Task{Prompt: "compute 6*7 and save it as answer.txt", Workspace: ws})
	if err != nil || !res.Success {
		logRun(t, res)
		t.Fatalf("err %v, res %+v", err, res)
	}
	if len(res.History) != 2 || res.History[0].ErrorClass != ClassIncomplete {
		logRun(t, res)
		t.Fatalf("rounds: %v", res.History)
	}
	mustContain(t, "feedback", srv.Requests()[2].Text(), "the task names files the calls did not write: answer.txt")
	if n := len(srv.Requests()); n != 5 {
		t.Errorf("%d model requests, want 5: the verifier is asked once, after the file exists", n)
	}
}

// TestToolModeLint: a JavaScript step's result carries the lint warnings
// (it still runs); a kernel cell gets none, since its names may come from
// earlier cells.
func TestToolModeLint(t *testing.T) {
	a, _, ws, _ := setup(t, Config{Mode: ModeTools}, nil,
		calls(pyCall("rows = [1, 2, 3]\n")),
		calls(pyCall("print(len(rows))\n")),
		calls(toolCall("execute_javascript", map[string]string{"code": "console.log(totl);\n"})),
		llmtest.Say("Done."),
	)
	res, err := a.Run(context.Background(), Task{Prompt: "count the rows", Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	st := steps(res)
	if len(st) != 3 {
		logRun(t, res)
		t.Fatalf("%d steps, want 3", len(st))
	}
	if len(st[1].Check) != 0 || strings.Contains(st[1].Output, "lint") {
		t.Errorf("kernel cell: check %v, output %q", st[1].Check, st[1].Output)
	}
	if st[2].Refused || len(st[2].Check) != 1 || st[2].Check[0].Kind != "lint" {
		t.Errorf("javascript step: refused %v, check %v", st[2].Refused, st[2].Check)
	}
	mustContain(t, "javascript step", st[2].Output, "'totl' is not declared [undeclared-global]")
}
