package server

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/codeagent/codeagent/agent"
	"github.com/codeagent/codeagent/llm/llmtest"
)

// page is headless Chromium on the server's page, logged in with the
// local token.
type page struct {
	t    *testing.T
	ctx  context.Context
	ts   *testServer
	name string // the session the test works in
}

func openPage(t *testing.T, ts *testServer) *page {
	t.Helper()
	p := &page{t: t, ctx: browser(t, chromium(t)), ts: ts}
	p.do(chromedp.Navigate(TokenURL(ts.URL, testLocalToken)), chromedp.WaitVisible(chromedp.ID("session-form")))
	return p
}

func (p *page) do(actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	if err := chromedp.Do(p.ctx, actions...); err != nil {
		p.t.Fatalf("browser: %v; %s", err, p.state())
	}
}

// state is what the page shows, for a failure's message.
func (p *page) state() string {
	var b strings.Builder
	for _, id := range []string{"status", "outcome", "progress", "history"} {
		text, _ := chromedp.Run(p.ctx, chromedp.Evaluate[string](`(document.getElementById("`+id+`") || {}).textContent || ""`))
		b.WriteString(id + " " + strings.Join(strings.Fields(text), " ") + "; ")
	}
	return b.String()
}

// poll waits for the script js to be true.
func (p *page) poll(what, js string) {
	p.t.Helper()
	ok, err := chromedp.Run(p.ctx, chromedp.Poll[bool](js, chromedp.WithPollingTimeout(90*time.Second), chromedp.WithPollingInterval(100*time.Millisecond)))
	if err != nil || !ok {
		p.t.Fatalf("%s: %v; %s", what, err, p.state())
	}
}

// is evaluates the script js, which must give a boolean.
func (p *page) is(js string) bool {
	p.t.Helper()
	v, err := chromedp.Run(p.ctx, chromedp.Evaluate[bool](js))
	if err != nil {
		p.t.Fatalf("%s: %v", js, err)
	}
	return v
}

// run types a task, chooses mode in the page's chooser, runs it and waits
// for its outcome.
func (p *page) run(task, mode string) {
	p.t.Helper()
	p.do(chromedp.SetValue(chromedp.ID("task"), task))
	if p.is(`!!document.querySelector('select#mode option[value="` + mode + `"]')`) {
		p.do(chromedp.SetValue(chromedp.ID("mode"), mode))
	} else {
		p.t.Errorf("the page has no mode chooser offering %s", mode)
	}
	p.do(chromedp.Click(chromedp.ID("run")))
	p.poll("the run's outcome", `document.getElementById("outcome").textContent !== "" && !document.getElementById("run").disabled`)
}

// reload reloads the page, which should show the session it showed; if it
// does not, the test selects it.
func (p *page) reload() {
	p.t.Helper()
	p.do(chromedp.Reload(), chromedp.WaitVisible(chromedp.ID("session-form")))
	reopened, _ := chromedp.Run(p.ctx, chromedp.Poll[bool](`!document.getElementById("workspace").hidden`, chromedp.WithPollingTimeout(10*time.Second)))
	if !reopened {
		p.t.Errorf("after a reload the page did not show its session again")
		p.open(p.name)
	}
}

// open selects the session name in the page's list.
func (p *page) open(name string) {
	p.t.Helper()
	p.name = name
	p.do(chromedp.Click(chromedp.Search(`//ul[@id="session-list"]//button[text()="`+name+`"]`)), chromedp.WaitVisible(chromedp.ID("task-form")))
}

// history is the session's runs, oldest first, from the store.
func (p *page) history(id string) []runJSON {
	p.t.Helper()
	var full struct{ History []struct{ ID string } }
	p.ts.json(p.t, "GET", "/v1/sessions/"+id, testLocalToken, nil, http.StatusOK, &full)
	var out []runJSON
	for _, h := range full.History {
		out = append(out, p.ts.waitRun(p.t, testLocalToken, h.ID))
	}
	return out
}

// historyText is the script whose value is the text of the earlier runs'
// elements matching sel.
func historyText(sel string) string {
	q, _ := json.Marshal("#history " + sel)
	return `[...document.querySelectorAll(` + string(q) + `)].map((e) => e.textContent).join("\n")`
}

// TestServeBrowserPageHistoryAfterReload runs a program-mode task through
// the page (its first attempt fails and is repaired, the second saves a
// chart) and a tool-mode task through the API, reloads the page, and finds
// both again, from the store: each attempt's code, output and status, the
// kernel cell with its output, the replayed program, and the chart.
func TestServeBrowserPageHistoryAfterReload(t *testing.T) {
	ts := newTestServer(t, testOptions{cfg: Config{LocalToken: testLocalToken}, replies: []llmtest.Reply{
		pyReply("import pandas as pd\n\ndf = pd.read_csv(\"sales.csv\")\nprint(df[\"qty\"].sum())\n"),
		pyReply(plotProgram), llmtest.Say(verifyOK),
		llmtest.Call(llmtest.ToolCall("execute_python", map[string]string{"code": "import pandas as pd\n\ndf = pd.read_csv('sales.csv')\nprint('units', df['units'].sum())\n"})),
		llmtest.Say("Printed the units."), llmtest.Say(verifyOK),
	}})
	csv := filepath.Join(t.TempDir(), "sales.csv")
	if err := os.WriteFile(csv, []byte(salesCSV), 0o644); err != nil {
		t.Fatal(err)
	}
	p := openPage(t, ts)
	p.name = "history"
	p.do(chromedp.SendKeys(chromedp.ID("new-session-name"), p.name), chromedp.Click(chromedp.ID("new-session")),
		chromedp.WaitVisible(chromedp.ID("workspace")),
		chromedp.SetUploadFiles(chromedp.ID("file-input"), []string{csv}), chromedp.Click(chromedp.ID("upload")),
		chromedp.WaitVisible(chromedp.Search(`//ul[@id="files"]//button[text()="sales.csv"]`)))
	p.run("Plot the monthly revenue of sales.csv and save it as revenue.png", "program")
	var list struct{ Sessions []sessionJSON }
	ts.json(t, "GET", "/v1/sessions", testLocalToken, nil, http.StatusOK, &list)
	if len(list.Sessions) != 1 {
		t.Fatalf("sessions: %+v", list.Sessions)
	}
	id := list.Sessions[0].ID
	var tools runJSON
	ts.json(t, "POST", "/v1/sessions/"+id+"/runs", testLocalToken, map[string]any{"task": "Sum the units", "mode": "tools"}, http.StatusAccepted, &tools)
	if runs := p.history(id); len(runs) != 2 || runs[0].Status != runSucceeded || runs[1].Status != runSucceeded {
		t.Fatalf("runs: %+v", runs)
	}

	p.reload()
	p.poll("both runs in the history", `document.querySelectorAll("#history li.run").length === 2`)
	p.poll("the chart from the history", `(() => { const i = document.querySelector('#history img[alt="revenue.png"]'); return !!i && i.complete && i.naturalWidth > 0; })()`)
	p.poll("the tool run's cell", historyText(".step pre.out")+` === "units 49\n"`)
	checks := map[string]string{
		"the first attempt's code":      historyText(`li.attempt[data-attempt="1"] pre.code`) + `.includes('print(df["qty"].sum())')`,
		"the first attempt's error":     historyText(`li.attempt[data-attempt="1"] pre.err`) + `.includes("KeyError")`,
		"the first attempt's status":    historyText(`li.attempt[data-attempt="1"] p.bad`) + `.includes("ran: error (exit 1")`,
		"the second attempt's code":     historyText(`li.attempt[data-attempt="2"] pre.code`) + `.includes('plt.savefig("revenue.png")')`,
		"the second attempt's output":   historyText(`li.attempt[data-attempt="2"] pre.out`) + `.includes("Saved revenue.png")`,
		"the second attempt's status":   historyText(`li.attempt[data-attempt="2"] p.good`) + `.includes("ran: ok (exit 0")`,
		"the program run's outcome":     historyText(".outcome") + `.includes("Done after 2 attempt(s) (program mode).")`,
		"the cell's code":               historyText(".step pre.code") + `.includes("print('units', df['units'].sum())")`,
		"the replayed program":          historyText("pre.code") + `.includes("df = pd.read_csv('sales.csv')\nprint('units'")`,
		"the tool run's outcome":        historyText(".outcome") + `.includes("(tools mode).")`,
		"the runs' tasks":               historyText("summary") + `.includes("Sum the units") && ` + historyText("summary") + `.includes("Plot the monthly revenue")`,
		"no run under Progress":         `document.getElementById("progress").childElementCount === 0`,
		"highlighted code from history": `document.querySelectorAll("#history .tok-keyword").length > 0`,
	}
	for what, js := range checks {
		if !p.is(js) {
			t.Errorf("after the reload, %s is missing: %s", what, js)
		}
	}
	if t.Failed() {
		t.Logf("page: %s", p.state())
	}
}

// TestServeBrowserPageModeChooser starts a run with "tools" chosen in the
// page's chooser. The model's first answer calls no tool, so that auto
// would turn to program mode: the run stays in tool mode only when the
// server received mode tools.
func TestServeBrowserPageModeChooser(t *testing.T) {
	ts := newTestServer(t, testOptions{cfg: Config{LocalToken: testLocalToken}, replies: []llmtest.Reply{
		llmtest.Say("I will run a cell."),
		llmtest.Call(llmtest.ToolCall("execute_python", map[string]string{"code": "print('from a cell')\n"})),
		llmtest.Say("Printed it."), llmtest.Say(verifyOK),
	}})
	s := ts.createSession(t, testLocalToken, "modes")
	p := openPage(t, ts)
	if v, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](`(document.getElementById("mode") || {}).value`)); err != nil || v != agent.ModeAuto {
		t.Errorf("the chooser's default: %q (%v), want auto", v, err)
	}
	p.open(s.Name)
	p.run("Print a line from a cell", "tools")
	runs := p.history(s.ID)
	if len(runs) != 1 || runs[0].Result == nil || runs[0].Result.Mode != agent.ModeTools || runs[0].Status != runSucceeded {
		t.Fatalf("the run: %+v", runs)
	}
	reqs := ts.model.Requests()
	if len(reqs) < 2 || reqs[0].JSON["tools"] == nil || !strings.Contains(string(reqs[0].Body), "execute_python") {
		t.Fatalf("the model was not offered the tools: %d requests", len(reqs))
	}
	p.poll("the cell's output, live", `[...document.querySelectorAll("#progress .step pre.out")].some((e) => e.textContent === "from a cell\n")`)
	if !p.is(`document.getElementById("outcome").textContent.includes("(tools mode)")`) {
		t.Errorf("outcome: %s", p.state())
	}
}

// hostile is text a model or a program could produce to get markup into
// the page.
const hostile = `<img src=x onerror="window.pwned=1"><script>window.pwned=2</script>`

// TestServeBrowserPageHistoryStaysText: runs whose task, code, output,
// tool calls and model text carry markup are shown from the history as
// text, and nothing of it runs or becomes an element.
func TestServeBrowserPageHistoryStaysText(t *testing.T) {
	ts := newTestServer(t, testOptions{cfg: Config{LocalToken: testLocalToken}, replies: []llmtest.Reply{
		pyReply("print('" + hostile + "')\n"), llmtest.Say(verifyOK),
		llmtest.Call(llmtest.ToolCall("execute_python", map[string]string{"code": "print('" + hostile + "')\n"}),
			llmtest.ToolCall("read_file", map[string]string{"path": `<img src=x onerror="window.pwned=3">.csv`})),
		llmtest.Say("Printed " + hostile), llmtest.Say(verifyOK),
	}})
	s := ts.createSession(t, testLocalToken, "hostile")
	for _, mode := range []string{"program", "tools"} {
		var r runJSON
		ts.json(t, "POST", "/v1/sessions/"+s.ID+"/runs", testLocalToken, map[string]any{"task": "Print " + hostile, "mode": mode}, http.StatusAccepted, &r)
		if got := ts.waitRun(t, testLocalToken, r.ID); got.Status != runSucceeded {
			t.Fatalf("%s run: %+v", mode, got)
		}
	}
	p := openPage(t, ts)
	p.open(s.Name)
	p.poll("the program's output as text", `[...document.querySelectorAll("#history pre.out")].filter((e) => e.textContent === `+"`"+hostile+"\\n`"+`).length >= 3`)
	p.poll("the read_file call as text", historyText(".step")+`.includes('path: <img src=x onerror="window.pwned=3">.csv')`)
	for what, js := range map[string]string{
		"the tasks as text":        historyText("summary") + ".includes(`Print " + hostile + "`)",
		"the code as text":         historyText("pre.code") + ".includes(`print('" + hostile + "')`)",
		"the model's text":         historyText("p.said") + ".includes(`Printed " + hostile + "`)",
		"no element was made":      `document.querySelectorAll("#history img, #history script, [onerror]").length === 0`,
		"nothing ran":              `window.pwned === undefined`,
		"the history is not empty": `document.getElementById("history-none").hidden`,
	} {
		if !p.is(js) {
			t.Errorf("%s: %s; %s", what, js, p.state())
		}
	}
}

// TestServeBrowserPageCellsAfterReload runs cells in the page's Python
// box, one printing and drawing a figure and one printing markup, reloads
// the page and finds them again from the store as they were drawn live:
// the code, the output, the figure (the workspace's file), and the markup
// as text.
func TestServeBrowserPageCellsAfterReload(t *testing.T) {
	ts := newTestServer(t, testOptions{cfg: Config{LocalToken: testLocalToken}, noModel: true, warmPython: 1})
	p := openPage(t, ts)
	p.name = "cells"
	p.do(chromedp.SendKeys(chromedp.ID("new-session-name"), p.name), chromedp.Click(chromedp.ID("new-session")),
		chromedp.WaitVisible(chromedp.ID("cell-form")))
	runCell := func(code string) {
		t.Helper()
		p.do(chromedp.SetValue(chromedp.ID("cell"), code), chromedp.Click(chromedp.ID("cell-run")), chromedp.WaitEnabled(chromedp.ID("cell-run")))
	}
	const imgMarkup = `<img src=x onerror=window.pwned=1>`
	runCell("print('drawn', 6 * 7)\nplt.plot([1, 3, 2])")
	p.poll("the figure, live", `(() => { const i = document.querySelector("#cells figure img"); return !!i && i.complete && i.naturalWidth > 0; })()`)
	runCell("print('" + imgMarkup + "')")
	p.poll("the markup, live", `[...document.querySelectorAll("#cells pre.out")].some((e) => e.textContent === "`+imgMarkup+`\n")`)

	p.reload()
	p.poll("both cells from the store", `document.querySelectorAll("#cells li.cell").length === 2`)
	p.poll("the figure from the store", `(() => { const i = document.querySelector('#cells figure img[alt="figure-1.png"]'); return !!i && i.complete && i.naturalWidth > 0; })()`)
	cells := `[...document.querySelectorAll("#cells li.cell")]`
	for what, js := range map[string]string{
		"the newest cell on top":  cells + `[0].querySelector("pre.code").textContent === "print('` + imgMarkup + `')"`,
		"the first cell's code":   cells + `[1].querySelector("pre.code").textContent === "print('drawn', 6 * 7)\nplt.plot([1, 3, 2])"`,
		"the first cell's number": cells + `[1].querySelector("h4").textContent === "In [1]"`,
		"the first cell's output": cells + `[1].querySelector("pre.out").textContent === "drawn 42\n"`,
		"the figure's name":       cells + `[1].querySelector("figcaption").textContent === "saved as figure-1.png"`,
		"the markup as text":      cells + `[0].querySelector("pre.out").textContent === "` + imgMarkup + `\n"`,
		"no element was made":     `document.querySelectorAll("#cells img").length === 1 && document.querySelectorAll("[onerror], #cells script").length === 0`,
		"nothing ran":             `window.pwned === undefined`,
		"highlighted code":        `document.querySelectorAll("#cells .tok-call").length > 0`,
	} {
		if !p.is(js) {
			text, _ := chromedp.Run(p.ctx, chromedp.Evaluate[string](`document.getElementById("cells").textContent`))
			t.Errorf("after the reload, %s: %s; cells %q", what, js, text)
		}
	}
}
