package server

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/codeagent/codeagent/llm/llmtest"
)

// TestServeBrowserPageApprovals starts a run from the page with "Approve
// each program" ticked; the page shows the first program with its buttons,
// Reject with a reason sends the reason to the model, and the second
// program, edited in the page and approved, is what runs. After each
// decision the buttons go and the decision is shown. Live and, after a
// reload, in the history: the edit is shown as what ran, and the second
// program's check shows its lint warning (an undefined name), not "no
// findings". Bidirectional controls in a program are shown escaped.
func TestServeBrowserPageApprovals(t *testing.T) {
	const reason = "print the other greeting"
	const edit = "print('edited in the page')\n"
	ts := newTestServer(t, testOptions{cfg: Config{LocalToken: testLocalToken}, replies: []llmtest.Reply{
		pyReply("print('first greeting')  # \u202e\u2066 reordered\n"), pyReply("def unused():\n    return df.head()\n\n\nprint('second greeting')\n"), llmtest.Say(verifyOK),
	}})
	s := ts.createSession(t, testLocalToken, "approvals")
	p := openPage(t, ts)
	p.open(s.Name)
	p.do(chromedp.SetValue(chromedp.ID("task"), "Print a greeting"), chromedp.Click(chromedp.ID("approve")), chromedp.Click(chromedp.ID("run")))

	first := `#progress .approval[data-approval="1"]`
	p.poll("the first approval's buttons", `!!document.querySelector('`+first+` button.reject')`)
	if !p.is(`document.querySelector('` + first + ` pre.code').textContent.includes("first greeting")`) {
		t.Errorf("the first approval does not show the program: %s", p.state())
	}
	// A bidirectional override would show the person code other than it is.
	if !p.is(`(t => t.includes("\\u202e\\u2066 reordered") && !t.includes("\u202e") && !t.includes("\u2066"))(document.querySelector('` + first + ` pre.code').textContent)`) {
		t.Errorf("the first approval shows bidirectional controls unescaped: %s", p.state())
	}
	p.do(chromedp.SetValue(chromedp.CSS(first+" textarea.reason"), reason), chromedp.Click(chromedp.CSS(first+" button.reject")))
	p.poll("the rejection shown", `(document.querySelector('`+first+` p.decision') || {}).textContent === "Rejected by anonymous: `+reason+`"`)
	if p.is(`!!document.querySelector('` + first + ` .approval-controls')`) {
		t.Error("the first approval's buttons stayed after the decision")
	}

	second := `#progress .approval[data-approval="2"]`
	p.poll("the second approval's buttons", `!!document.querySelector('`+second+` button.edit-code')`)
	if reqs := ts.model.Requests(); len(reqs) != 2 || !strings.Contains(reqs[1].Text(), reason) {
		t.Fatalf("the model was not told the reason (%d requests)", len(reqs))
	}
	p.do(chromedp.Click(chromedp.CSS(second+" button.edit-code")),
		chromedp.SetValue(chromedp.CSS(second+" textarea.edit"), edit),
		chromedp.Click(chromedp.CSS(second+" button.approve")))
	p.poll("the run's outcome", `document.getElementById("outcome").textContent.startsWith("Done") && !document.getElementById("run").disabled`)
	for what, js := range map[string]string{
		"the edited program's output": `[...document.querySelectorAll("#progress pre.out")].some((e) => e.textContent === "edited in the page\n")`,
		"the approval shown":          `(document.querySelector('` + second + ` p.decision') || {}).textContent === "Approved by anonymous, with an edited program"`,
		"no buttons left":             `document.querySelectorAll("#progress .approval-controls").length === 0`,
	} {
		if !p.is(js) {
			t.Errorf("%s: %s; %s", what, js, p.state())
		}
	}
	if runs := p.history(s.ID); len(runs) != 1 || runs[0].Status != runSucceeded {
		t.Fatalf("runs: %+v", runs)
	}
	shownRan := func(where string) {
		t.Helper()
		at := where + ` li.attempt[data-attempt="2"]`
		for what, js := range map[string]string{
			"the edit as what ran": `[...document.querySelectorAll('` + at + ` .edited pre.code')].map((e) => e.textContent).join() === "` + strings.TrimSuffix(edit, "\n") + `\n"`,
			"the lint warning":     `document.querySelector('` + at + `').textContent.includes("warning: line 2: undefined-name undefined name 'df'")`,
			"no clean check":       `!document.querySelector('` + at + `').textContent.includes("check: no findings")`,
		} {
			if !p.is(js) {
				t.Errorf("%s: %s: %s; %s", where, what, js, p.state())
			}
		}
	}
	shownRan("#progress")
	p.reload()
	p.poll("the run in the history", `!!document.querySelector('#history li.attempt[data-attempt="2"] .edited')`)
	shownRan("#history")
}
