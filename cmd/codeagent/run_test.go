package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/codeagent/codeagent/agent"
	"github.com/codeagent/codeagent/llm/llmtest"
)

// modelServer starts a fake OpenAI-compatible server and returns the
// provider flags that point run at it; the environment is cleared so that
// only the flags count.
func modelServer(t *testing.T, replies ...llmtest.Reply) (*llmtest.Server, []string) {
	t.Helper()
	for _, k := range []string{"CODEAGENT_PROVIDER", "CODEAGENT_MODEL", "OPENAI_BASE_URL", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"} {
		t.Setenv(k, "")
	}
	srv := llmtest.NewOpenAIServer(t, replies...)
	return srv, []string{"--base-url", srv.BaseURL, "--model", "test-model"}
}

func pyAnswer(code string) llmtest.Reply {
	return llmtest.Say("```python\n" + code + "```")
}

const runSalesCSV = `date,product,units,unit_price
2024-01-05,Widget,10,2.50
2024-01-17,Gadget,3,12.00
2024-02-02,Widget,7,2.50
2024-02-14,Gizmo,4,8.00
2024-03-01,Gadget,5,12.00
2024-03-09,Thingamajig,2,30.00
2024-03-30,Whatsit,20,0.75
`

const runAnalysis = `import pandas as pd
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt


def main():
    df = pd.read_csv("sales.csv", parse_dates=["date"])
    df["revenue"] = df["units"] * df["unit_price"]
    top = df.groupby("product")["revenue"].sum().sort_values(ascending=False).head(5)
    print("Top 5 products by revenue:")
    for name, rev in top.items():
        print(f"  {name:<12} {rev:8.2f}")
    monthly = df.set_index("date")["revenue"].resample("M").sum()
    ax = monthly.plot(marker="o", title="Monthly revenue")
    ax.set_ylabel("revenue")
    plt.tight_layout()
    plt.savefig("revenue_trend.png")
    print("Saved revenue_trend.png")


if __name__ == "__main__":
    main()
`

func salesFile(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "sales.csv")
	if err := os.WriteFile(p, []byte(runSalesCSV), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const runTask = "Analyze sales.csv: top 5 products by revenue, plot the monthly trend, save it as revenue_trend.png"

func TestRunJSONWithFilesAndOut(t *testing.T) {
	_, flags := modelServer(t,
		pyAnswer("import pandas as pd\n\ndf = pd.read_csv(\"sales.csv\")\ndf[\"revenue\"] = df[\"qty\"] * df[\"price\"]\n"),
		pyAnswer(runAnalysis),
		llmtest.Say(`{"task_complete": true, "missing": ""}`),
	)
	out := filepath.Join(t.TempDir(), "results")
	args := append(append([]string{"run"}, flags...), "--file", salesFile(t), "--out", out, "--json", runTask)
	code, stdout, stderr := runCLI(t, "", args...)
	if code != exitOK {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	var res struct {
		Success   bool   `json:"success"`
		Attempts  int    `json:"attempts"`
		Code      string `json:"code"`
		Output    string `json:"output"`
		Artifacts []struct {
			Path string `json:"path"`
			Size int64  `json:"size"`
		} `json:"artifacts"`
		Usage   agent.Usage `json:"usage"`
		History []struct {
			Code       string           `json:"code"`
			Check      []map[string]any `json:"check"`
			Result     map[string]any   `json:"result"`
			ErrorClass string           `json:"error_class"`
			Verdict    *agent.Verdict   `json:"verdict"`
		} `json:"history"`
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, stdout)
	}
	if !res.Success || res.Attempts != 2 || res.Code != runAnalysis || !strings.Contains(res.Output, "Thingamajig") {
		t.Errorf("result: %+v", res)
	}
	if len(res.Artifacts) != 1 || res.Artifacts[0].Path != "revenue_trend.png" {
		t.Errorf("artifacts: %+v", res.Artifacts)
	}
	if res.Usage.Requests != 3 || res.Usage.TotalTokens != 45 {
		t.Errorf("usage: %+v", res.Usage)
	}
	if len(res.History) != 2 || res.History[0].ErrorClass != "value" || res.History[0].Result["status"] != "error" ||
		!strings.Contains(res.History[0].Result["stderr"].(string), "KeyError: 'qty'") || res.History[1].Verdict == nil ||
		!res.History[1].Verdict.TaskComplete || res.History[0].Check == nil {
		t.Errorf("history: %+v", res.History)
	}
	for _, name := range []string{"solution.py", "revenue_trend.png"} {
		if fi, err := os.Stat(filepath.Join(out, name)); err != nil || fi.Size() == 0 {
			t.Errorf("%s not copied to --out: %v", name, err)
		}
	}
	if _, err := os.Stat(filepath.Join(out, "sales.csv")); err == nil {
		t.Error("the unchanged input was copied as an artifact")
	}
}

func TestRunHumanOutputProgressAndEvents(t *testing.T) {
	_, flags := modelServer(t,
		pyAnswer("print(totl)\n"),
		pyAnswer("total = sum(range(1, 11))\nprint(f\"total: {total}\")\n"),
	)
	events := filepath.Join(t.TempDir(), "events.jsonl")
	args := append(append([]string{"run"}, flags...), "--no-verify", "--progress", "--events", events, "sum 1..10")
	code, stdout, stderr := runCLI(t, "", args...)
	if code != exitOK {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	for _, want := range []string{"── code (python) ──\ntotal = sum(range(1, 11))", "── output ──\ntotal: 55\n", "── artifacts ──\n(none)", "success after 2 attempt(s)"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	for _, want := range []string{
		"attempt 1/5 · generating · checking · running ✗ name: NameError: name 'totl' is not defined\n",
		"attempt 2/5 · generating · checking · running ✓\n", "done: success after 2 attempt(s)",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("progress lacks %q:\n%s", want, stderr)
		}
	}
	b, err := os.ReadFile(events)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	var first, last agent.Event
	json.Unmarshal([]byte(lines[0]), &first)
	json.Unmarshal([]byte(lines[len(lines)-1]), &last)
	if len(lines) != 9 || first.Type != agent.EventAttemptStart || last.Type != agent.EventDone || last.Success == nil || !*last.Success {
		t.Errorf("events:\n%s", b)
	}
}

func TestRunEventsOnStdout(t *testing.T) {
	_, flags := modelServer(t, pyAnswer("print(1)\n"))
	args := append(append([]string{"run"}, flags...), "--no-verify", "--events", "-", "print 1")
	code, stdout, stderr := runCLI(t, "", args...)
	if code != exitOK || stderr != "" {
		t.Fatalf("exit %d, stderr %s", code, stderr)
	}
	for _, l := range strings.Split(strings.TrimSpace(stdout), "\n") {
		var e agent.Event
		if err := json.Unmarshal([]byte(l), &e); err != nil || e.Type == "" {
			t.Errorf("not an event line: %q", l)
		}
	}
}

func TestRunBudgetExhaustedExits1(t *testing.T) {
	bad := pyAnswer("raise ValueError(\"never right\")\n")
	_, flags := modelServer(t, bad, bad)
	args := append(append([]string{"run"}, flags...), "--max-iterations", "2", "--json", "do it")
	code, stdout, stderr := runCLI(t, "", args...)
	if code != exitFailure || !strings.Contains(stderr, "not achieved within 2 attempts") {
		t.Fatalf("exit %d, stderr %s", code, stderr)
	}
	var res agent.Result
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || res.Success || res.Attempts != 2 ||
		res.History[1].ErrorClass != agent.ClassValue {
		t.Errorf("result %+v (%v)", res, err)
	}
}

func TestRunProviderFailureExits3(t *testing.T) {
	_, flags := modelServer(t, llmtest.Fail(401, "invalid api key"))
	args := append(append([]string{"run"}, flags...), "do it")
	if code, _, stderr := runCLI(t, "", args...); code != exitProvider || !strings.Contains(stderr, "rejected the API key") {
		t.Fatalf("exit %d, stderr %s", code, stderr)
	}
}

func TestRunTestFile(t *testing.T) {
	tests := filepath.Join(t.TempDir(), "test_mul.py")
	os.WriteFile(tests, []byte("from solution import mul\n\n\ndef test_mul():\n    assert mul(3, 4) == 12\n"), 0o644)
	for _, c := range []struct {
		answer string
		want   int
	}{{"def mul(a, b):\n    return a * b\n", exitOK}, {"def mul(a, b):\n    return a + b\n", exitFailure}} {
		_, flags := modelServer(t, pyAnswer(c.answer))
		args := append(append([]string{"run"}, flags...), "--max-iterations", "1", "--test-file", tests, "mul(a, b) multiplies")
		if code, stdout, stderr := runCLI(t, "", args...); code != c.want {
			t.Errorf("%q: exit %d, want %d\n%s\n%s", c.answer, code, c.want, stdout, stderr)
		}
	}
}

func TestRunUsageErrors(t *testing.T) {
	_, flags := modelServer(t)
	missing := filepath.Join(t.TempDir(), "nope.csv")
	for _, extra := range [][]string{
		{},
		{"--max-iterations", "0", "x"},
		{"--json", "--events", "-", "x"},
		{"--tests", "--test-file", "t.py", "x"},
		{"--file", missing, "x"},
		{"--test-file", missing, "x"},
		{"--lang", "cobol", "x"},
		{"--lang", "bash", "--tests", "x"},
		{"--timeout", "0s", "x"},
		{"two", "args"},
	} {
		args := append(append([]string{"run"}, flags...), extra...)
		if code, _, stderr := runCLI(t, "", args...); code != exitUsage || stderr == "" {
			t.Errorf("%v: exit %d, stderr %q", extra, code, stderr)
		}
	}
	// A local server with no model is a configuration error.
	if code, _, stderr := runCLI(t, "", "run", "--base-url", "http://127.0.0.1:1/v1", "x"); code != exitUsage || !strings.Contains(stderr, "--model") {
		t.Errorf("no model: exit %d, %s", code, stderr)
	}
}

// TestRunDemoOutput prints the human output of docs/RUN.md's example, run
// against the local fake server: go test -run DemoOutput -v ./cmd/codeagent.
func TestRunDemoOutput(t *testing.T) {
	if os.Getenv("CODEAGENT_DEMO") == "" {
		t.Skip("set CODEAGENT_DEMO=1 to print the demo of docs/RUN.md")
	}
	_, flags := modelServer(t,
		pyAnswer("import pandas as pd\n\ndf = pd.read_csv(\"sales_data.csv\")\nprint(df.head())\n"),
		pyAnswer("import pandas as pd\n\ndf = pd.read_csv(\"sales.csv\")\nprint(df.groupby(\"product\")[\"revenue\"].sum())\n"),
		pyAnswer(runAnalysis),
		llmtest.Say(`{"task_complete": true, "missing": ""}`),
	)
	out := filepath.Join(t.TempDir(), "results")
	args := append(append([]string{"run"}, flags...), "--progress", "--file", salesFile(t), "--out", out, runTask)
	code, stdout, stderr := runCLI(t, "", args...)
	fmt.Printf("exit %d\n--- stderr ---\n%s--- stdout ---\n%s", code, stderr, stdout)
}

// An answer over --max-answer fails its attempt, visibly, and the next
// attempt replaces it.
func TestRunAnswerOverTheCapIsReplaced(t *testing.T) {
	huge := llmtest.Reply{Text: strings.Repeat("print(1)\n", 1000), Repeat: 1000} // 9 MB
	_, flags := modelServer(t, huge, pyAnswer("print('small')\n"))
	args := append(append([]string{"run"}, flags...), "--max-answer", "64KiB", "--no-verify", "--progress", "print something")
	code, stdout, stderr := runCLI(t, "", args...)
	if code != exitOK || !strings.Contains(stdout, "small") {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stderr, "✗ bad_answer: the answer from") || !strings.Contains(stderr, "64 KiB") {
		t.Errorf("progress does not say why attempt 1 failed:\n%s", stderr)
	}
}

// A verifier that never gives a verdict fails the run, and the reason is
// on the terminal without --json or --progress.
func TestRunUnreadableVerdictIsShown(t *testing.T) {
	_, flags := modelServer(t, pyAnswer("print('total 5')\n"), llmtest.Say("{}"), llmtest.Say("{}"))
	args := append(append([]string{"run"}, flags...), "--max-iterations", "1", "print the total")
	code, _, stderr := runCLI(t, "", args...)
	if code != exitFailure || !strings.Contains(stderr, "the verifier's answer could not be read (twice; it answered `{}`)") {
		t.Fatalf("exit %d, stderr %s", code, stderr)
	}
}
