package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/codeagent/codeagent/llm"
	"github.com/codeagent/codeagent/llm/llmtest"
	"github.com/codeagent/codeagent/llm/providers"
	"github.com/codeagent/codeagent/safety"
	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/sandbox/backends"
	"github.com/codeagent/codeagent/workspace"
)

// The real parts, shared by the tests: the namespace sandbox and the checker.
var (
	realOnce    sync.Once
	realSandbox sandbox.Sandbox
	realChecker *safety.Checker
	realErr     error
)

func realParts(t testing.TB) (sandbox.Sandbox, *safety.Checker) {
	t.Helper()
	realOnce.Do(func() {
		realSandbox, realErr = backends.Open("auto", backends.Options{})
		if realErr == nil {
			realChecker, realErr = safety.New(nil)
		}
	})
	if realErr != nil {
		t.Skipf("no sandbox here: %v", realErr)
	}
	return realSandbox, realChecker
}

// py wraps code as a model answer.
func py(code string) llmtest.Reply {
	return llmtest.Say("Here is the program.\n\n```python\n" + code + "```\n")
}

// analyst is a model that writes the analysis when its prompt shows the
// columns it printed, and looks at them again when it does not.
var analyst = llmtest.Reply{Func: func(req llmtest.Request) llmtest.Reply {
	if strings.Contains(req.Text(), columnList) {
		return py(analysis)
	}
	return py("import pandas as pd\n\ndf = pd.read_csv(\"sales.csv\")\nprint(list(df.columns))\n")
}}

// judge is a verifier that judges the sales analysis complete when the
// output shows the top products.
var judge = llmtest.Reply{Func: func(req llmtest.Request) llmtest.Reply {
	return verdict(strings.Contains(req.Text(), "Top 5 products by revenue:"), "the top 5 products by revenue are missing")
}}

// verdict is a verifier's answer.
func verdict(complete bool, missing string) llmtest.Reply {
	return llmtest.Say(fmt.Sprintf(`{"task_complete": %v, "missing": %q}`, complete, missing))
}

// setup returns an agent talking to a fake OpenAI-compatible server with
// the real sandbox and checker, and a workspace holding files.
func setup(t *testing.T, cfg Config, files map[string]string, replies ...llmtest.Reply) (*Agent, *llmtest.Server, *workspace.Workspace, *[]Event) {
	t.Helper()
	return setupWire(t, wires[0], cfg, files, replies...)
}

// wire is a fake model server of one protocol.
type wire struct {
	name      string
	provider  string
	newServer func(testing.TB, ...llmtest.Reply) *llmtest.Server
}

var wires = []wire{
	{"openai", llm.ProviderOpenAI, llmtest.NewOpenAIServer},
	{"anthropic", llm.ProviderAnthropic, llmtest.NewAnthropicServer},
}

// setupWire is setup with the fake server of w's protocol.
func setupWire(t *testing.T, w wire, cfg Config, files map[string]string, replies ...llmtest.Reply) (*Agent, *llmtest.Server, *workspace.Workspace, *[]Event) {
	t.Helper()
	return setupWith(t, w, cfg, files, nil, replies...)
}

// setupWith is setupWire with more dependencies, which more sets.
func setupWith(t *testing.T, w wire, cfg Config, files map[string]string, more func(*Deps), replies ...llmtest.Reply) (*Agent, *llmtest.Server, *workspace.Workspace, *[]Event) {
	t.Helper()
	sb, ck := realParts(t)
	srv := w.newServer(t, replies...)
	p, err := providers.New(llmtest.Config(w.provider, srv.BaseURL), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ws, err := workspace.New(filepath.Join(t.TempDir(), "ws"))
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(ws.Dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var events []Event
	var mu sync.Mutex
	obs := ObserverFunc(func(e Event) { mu.Lock(); events = append(events, e); mu.Unlock() })
	deps := Deps{Provider: p, Sandbox: sb, Checker: ck, Observer: obs}
	if more != nil {
		more(&deps)
	}
	a, err := New(cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	return a, srv, ws, &events
}

// sent is everything a request sent to the model: system prompt and messages.
func sent(r llmtest.Request) string {
	var b strings.Builder
	msgs, _ := r.JSON["messages"].([]any)
	for _, m := range msgs {
		mm, _ := m.(map[string]any)
		switch c := mm["content"].(type) {
		case string:
			b.WriteString(c + "\n")
		case []any:
			for _, part := range c {
				if p, ok := part.(map[string]any); ok {
					s, _ := p["text"].(string)
					b.WriteString(s + "\n")
				}
			}
		}
	}
	return b.String()
}

func classes(h []Attempt) []ErrorClass {
	var out []ErrorClass
	for _, a := range h {
		out = append(out, a.ErrorClass)
	}
	return out
}

func wantClasses(t *testing.T, h []Attempt, want ...ErrorClass) {
	t.Helper()
	if got := classes(h); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("error classes = %q, want %q", got, want)
	}
}

func mustContain(t *testing.T, what, text string, subs ...string) {
	t.Helper()
	for _, s := range subs {
		if !strings.Contains(text, s) {
			t.Errorf("%s lacks %q:\n%s", what, s, text)
		}
	}
}

const salesCSV = `date,product,units,unit_price
2024-01-05,Widget,10,2.50
2024-01-17,Gadget,3,12.00
2024-02-02,Widget,7,2.50
2024-02-14,Gizmo,4,8.00
2024-02-20,Doohickey,9,1.25
2024-03-01,Gadget,5,12.00
2024-03-09,Thingamajig,2,30.00
2024-03-28,Gizmo,6,8.00
2024-03-30,Whatsit,20,0.75
`

const analysis = `import pandas as pd
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt


def main():
    df = pd.read_csv("sales.csv", parse_dates=["date"])
    df["revenue"] = df["units"] * df["unit_price"]
    top = df.groupby("product")["revenue"].sum().sort_values(ascending=False).head(5)
    print("Top 5 products by revenue:")
    for name, rev in top.items():
        print(f"{name}: {rev:.2f}")
    monthly = df.set_index("date")["revenue"].resample("M").sum()
    ax = monthly.plot(marker="o", title="Monthly revenue")
    ax.set_ylabel("revenue")
    plt.tight_layout()
    plt.savefig("revenue_trend.png")
    print("Saved revenue_trend.png")


if __name__ == "__main__":
    main()
`

// TestSelfCorrectionTrajectory is the classic data-analysis trajectory
// with the default budgets: NameError, a guessed file name, a guessed
// column, printing the columns (incomplete: revenue_trend.png, which the
// task names, is missing, said before any verifier is asked; progress,
// not a failed repair), then the right answer at attempt 5, from a model
// that needs the columns it printed to write it (without them it looks
// again), which the verifier accepts.
func TestSelfCorrectionTrajectory(t *testing.T) {
	const missing = "the task names files the program did not write: revenue_trend.png"
	a, srv, ws, events := setup(t, Config{Verify: true, Limits: sandbox.Limits{WallTime: 30 * time.Second, Memory: 512 << 20}},
		map[string]string{"sales.csv": salesCSV},
		py("def main():\n    df = pd.read_csv(\"sales.csv\")\n    print(df.head())\n\n\nmain()\n"),
		py("import pandas as pd\n\ndf = pd.read_csv(\"sales_data.csv\")\nprint(df.head())\n"),
		py("import pandas as pd\n\ndf = pd.read_csv(\"sales.csv\")\ndf[\"revenue\"] = df[\"quantity\"] * df[\"price\"]\nprint(df)\n"),
		py("import pandas as pd\n\ndf = pd.read_csv(\"sales.csv\")\nprint(list(df.columns))\n"),
		analyst,
		judge,
	)
	res, err := a.Run(context.Background(), Task{Prompt: "Analyze sales.csv: top 5 products by revenue, plot the monthly trend, save it as revenue_trend.png", Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Success || res.Attempts != 5 {
		t.Fatalf("success %v after %d attempts (%s); history %+v", res.Success, res.Attempts, res.Message, classes(res.History))
	}
	wantClasses(t, res.History, ClassName, ClassFile, ClassValue, ClassIncomplete, ClassNone)
	mustContain(t, "output", res.Output, "Top 5 products by revenue:", "Thingamajig: 60.00", "Saved revenue_trend.png")
	if len(res.Artifacts) != 1 || res.Artifacts[0].Path != "revenue_trend.png" || res.Artifacts[0].Size < 1000 {
		t.Errorf("artifacts = %+v", res.Artifacts)
	}
	if res.Code != analysis || res.Usage.Requests != 6 || res.Usage.TotalTokens != 6*15 {
		t.Errorf("code or usage wrong: usage %+v", res.Usage)
	}
	if h := res.History[3]; h.Verdict != nil {
		t.Errorf("the verifier was asked of attempt 4, which lacks the file the task names: %+v", h.Verdict)
	}

	reqs := srv.Requests()
	if len(reqs) != 6 {
		t.Fatalf("%d requests, want 6", len(reqs))
	}
	sys, _ := reqs[0].JSON["messages"].([]any)[0].(map[string]any)["content"].(string)
	mustContain(t, "system prompt", sys, "solution.py", "import", "entry point", "stdout", "working directory")
	mustContain(t, "first request", sent(reqs[0]), "top 5 products", "sales.csv (", "| date,product,units,unit_price", "attempt 1 of 5")
	mustContain(t, "second request", sent(reqs[1]), "NameError: name 'pd' is not defined", "Attempt 1 of 5 failed (name)", "1  def main():")
	mustContain(t, "third request", sent(reqs[2]), "FileNotFoundError", "sales_data.csv")
	mustContain(t, "fourth request", sent(reqs[3]), "KeyError: 'quantity'")
	// The incomplete run was progress: attempt 5 repairs it in the same
	// conversation, which shows the columns.
	if res.History[4].FreshStart {
		t.Error("attempt 5 was a fresh start")
	}
	mustContain(t, "fifth request", sent(reqs[4]), columnList, "What is missing: "+missing, "print(df.head())", "It created no files.")
	if reqs[5].JSON["response_format"] == nil {
		t.Errorf("the verification request did not ask for JSON: %s", reqs[5].Body)
	}
	mustContain(t, "final verification", sent(reqs[5]), "task_complete", "Top 5 products by revenue:", "revenue_trend.png (")

	var types []string
	for _, e := range *events {
		types = append(types, string(e.Type))
	}
	joined := strings.Join(types, " ")
	if !strings.HasPrefix(joined, "attempt_start generated checked executed attempt_start") ||
		!strings.HasSuffix(joined, "executed verified done") || strings.Count(joined, "attempt_start") != 5 {
		t.Errorf("events: %s", joined)
	}
	if last := (*events)[len(*events)-1]; last.Success == nil || !*last.Success || last.Attempt != 5 {
		t.Errorf("done event = %+v", last)
	}
}

// A fresh start remembers what the runs found out: the output of a run
// that succeeded (the columns), the names that were not there and the
// lines the errors were at; without that the model would explore again.
func TestFreshStartRemembers(t *testing.T) {
	a, srv, ws, _ := setup(t, Config{Verify: true, FreshStartAfter: 2, Limits: sandbox.Limits{Memory: 512 << 20}},
		map[string]string{"sales.csv": salesCSV},
		py("import pandas as pd\n\ndf = pd.read_csv(\"sales.csv\")\nprint(list(df.columns))\n"),
		py("import pandas as pd\n\ndf = pd.read_csv(\"sales.csv\")\ndf[\"revenue\"] = df[\"quantity\"] * df[\"price\"]\nprint(df)\n"),
		py("import pandas as pd\n\ndf = pd.read_csv(\"sales_data.csv\")\nprint(df)\n"),
		analyst,
		judge,
	)
	res, err := a.Run(context.Background(), Task{Prompt: "Analyze sales.csv: top 5 products by revenue, plot the monthly trend, save it as revenue_trend.png", Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Success || res.Attempts != 4 || !res.History[3].FreshStart {
		t.Fatalf("success %v after %d attempts (%s); %q", res.Success, res.Attempts, res.Message, classes(res.History))
	}
	fresh := srv.Requests()[3].Text()
	mustContain(t, "fresh start", fresh, "Start afresh", "What earlier runs printed", "attempt 1:", columnList,
		`the key or column "quantity"`, `the file "sales_data.csv"`,
		`attempt 2 (value): KeyError: 'quantity' at line 4: df["revenue"] = df["quantity"] * df["price"]`,
		"attempt 3 (file): FileNotFoundError: [Errno 2] No such file or directory: 'sales_data.csv' at line 3:")
	if strings.Contains(fresh, "print(df)") {
		t.Error("the fresh start carried the old conversation")
	}
}

func TestSafetyRejectionIsFedBackAndFixed(t *testing.T) {
	a, srv, ws, _ := setup(t, Config{}, nil,
		py("import subprocess\n\nprint(subprocess.run([\"ls\"], capture_output=True).stdout)\n"),
		py("from pathlib import Path\n\nprint(sorted(p.name for p in Path(\".\").iterdir()))\n"),
	)
	res, err := a.Run(context.Background(), Task{Prompt: "list the files here", Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Success || res.Attempts != 2 {
		t.Fatalf("success %v after %d attempts", res.Success, res.Attempts)
	}
	wantClasses(t, res.History, ClassSafety, ClassNone)
	if h := res.History[0]; len(h.Check) == 0 || h.Check[0].Rule != safety.RuleForbiddenImport || h.Result != nil {
		t.Errorf("attempt 1: %+v", h)
	}
	mustContain(t, "feedback", sent(srv.Requests()[1]), "was not run: the static checker rejected", "forbidden-import",
		"fix: do the work in Python itself", "Attempt 1 of 5", "4 attempts are left")
}

func TestInfiniteLoopTimesOutAndIsFixed(t *testing.T) {
	a, srv, ws, _ := setup(t, Config{Limits: sandbox.Limits{WallTime: 2 * time.Second}}, nil,
		py("n = 1\nwhile n > 0:\n    n += 1\nprint(n)\n"),
		py("print(sum(range(1, 101)))\n"),
	)
	start := time.Now()
	res, err := a.Run(context.Background(), Task{Prompt: "print the sum of 1..100", Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Success || res.Output != "5050\n" {
		t.Fatalf("success %v, output %q", res.Success, res.Output)
	}
	wantClasses(t, res.History, ClassTimeout, ClassNone)
	if s := res.History[0].Result; s == nil || s.Status != "timeout" {
		t.Errorf("attempt 1 result = %+v", s)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("took %s", d)
	}
	mustContain(t, "feedback", sent(srv.Requests()[1]), "(timeout)", "The program was stopped: ", "loop that never ends")
}

func TestTestDrivenMode(t *testing.T) {
	vacuous := "from solution import add\n\n\ndef test_true():\n    assert True\n"
	good := "from solution import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n    assert add(-1, 1) == 0\n"
	a, srv, ws, events := setup(t, Config{Tests: true, Verify: true}, nil,
		py(vacuous),
		py(good),
		py("def add(a, b):\n    return a - b\n\n\nif __name__ == \"__main__\":\n    print(add(2, 3))\n"),
		py("def add(a, b):\n    return a + b\n\n\nif __name__ == \"__main__\":\n    print(add(2, 3))\n"),
	)
	res, err := a.Run(context.Background(), Task{Prompt: "a function add(a, b) returning the sum; the program prints add(2, 3)", Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Success || res.Attempts != 2 || res.Output != "5\n" || res.Tests != good {
		t.Fatalf("success %v, attempts %d, output %q, tests %q (%s)", res.Success, res.Attempts, res.Output, res.Tests, res.Message)
	}
	wantClasses(t, res.TestRounds, ClassVacuousTests, ClassNone)
	wantClasses(t, res.History, ClassAssertion, ClassNone)
	if h := res.History[1]; h.TestResult == nil || h.TestResult.Status != "ok" || h.Result == nil || h.Result.Stdout != "5\n" {
		t.Errorf("attempt 2 = %+v", h)
	}
	reqs := srv.Requests()
	if len(reqs) != 4 {
		t.Fatalf("%d requests, want 4 (no verification when tests decide)", len(reqs))
	}
	mustContain(t, "tests request", sent(reqs[0]), "test_solution.py", "from the module solution")
	mustContain(t, "rejection", sent(reqs[1]), "they all pass against a stub")
	mustContain(t, "code request", sent(reqs[2]), "must pass these pytest tests", "assert add(2, 3) == 5")
	mustContain(t, "debug request", sent(reqs[3]), "The tests failed", "Test output (pytest)", "assert -1 == 5")
	var phases []string
	for _, e := range *events {
		if e.Type == EventExecuted {
			phases = append(phases, e.Phase)
		}
	}
	if strings.Join(phases, " ") != "tests tests code code program" {
		t.Errorf("executed phases: %v", phases)
	}
}

func TestUserTestFile(t *testing.T) {
	tests := "from solution import mul\n\n\ndef test_mul():\n    assert mul(3, 4) == 12\n"
	t.Run("pass", func(t *testing.T) {
		a, srv, ws, _ := setup(t, Config{Verify: true}, nil, py("def mul(a, b):\n    return a * b\n"))
		res, err := a.Run(context.Background(), Task{Prompt: "mul(a, b) multiplies", Workspace: ws, TestCode: tests})
		if err != nil {
			t.Fatal(err)
		}
		if !res.Success || res.Attempts != 1 || len(srv.Requests()) != 1 {
			t.Fatalf("success %v, attempts %d, %d requests", res.Success, res.Attempts, len(srv.Requests()))
		}
		mustContain(t, "output", res.Output, "1 passed")
		mustContain(t, "request", sent(srv.Requests()[0]), "assert mul(3, 4) == 12")
	})
	t.Run("fail", func(t *testing.T) {
		wrong := py("def mul(a, b):\n    return a + b\n")
		a, _, ws, _ := setup(t, Config{MaxIterations: 2}, nil, wrong, wrong)
		res, err := a.Run(context.Background(), Task{Prompt: "mul(a, b) multiplies", Workspace: ws, TestCode: tests})
		if err != nil {
			t.Fatal(err)
		}
		if res.Success || res.Attempts != 2 || !strings.Contains(res.Message, "within 2 attempts") {
			t.Fatalf("success %v, attempts %d, message %q", res.Success, res.Attempts, res.Message)
		}
		wantClasses(t, res.History, ClassAssertion, ClassAssertion)
	})
}

func TestProviderFailureEndsTheRun(t *testing.T) {
	a, _, ws, _ := setup(t, Config{}, nil, llmtest.Fail(401, "bad key"))
	res, err := a.Run(context.Background(), Task{Prompt: "x", Workspace: ws})
	if llm.KindOf(err) != llm.KindAuth || res == nil || res.Success {
		t.Fatalf("err = %v, res = %+v", err, res)
	}
}
