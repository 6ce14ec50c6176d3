package server

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestServeBrowserKernelCell drives the page's cell box in headless
// Chromium: a DataFrame loaded in one cell and shown as a table by the
// next, a figure rendered, the kernel's status, and a cell whose HTML
// carries script, which the page shows as text only.
func TestServeBrowserKernelCell(t *testing.T) {
	bin := chromium(t)
	ts := newTestServer(t, testOptions{cfg: Config{LocalToken: testLocalToken}, noModel: true, warmPython: 1})
	bctx := browser(t, bin)
	runCell := func(code string) {
		t.Helper()
		err := chromedp.Do(bctx,
			chromedp.SetValue(chromedp.ID("cell"), code),
			chromedp.Click(chromedp.ID("cell-run")),
			chromedp.WaitEnabled(chromedp.ID("cell-run")),
		)
		if err != nil {
			t.Fatalf("cell %q: %v", code, err)
		}
	}
	poll := func(what, js string) {
		t.Helper()
		ok, err := chromedp.Run(bctx, chromedp.Poll[bool](js, chromedp.WithPollingTimeout(90*time.Second), chromedp.WithPollingInterval(100*time.Millisecond)))
		if err != nil || !ok {
			cells, _ := chromedp.Run(bctx, chromedp.Text(chromedp.ID("cells")))
			status, _ := chromedp.Run(bctx, chromedp.Text(chromedp.ID("status")))
			t.Fatalf("%s: %v; cells %q, status %q", what, err, cells, status)
		}
	}
	if err := chromedp.Do(bctx, chromedp.Navigate(TokenURL(ts.URL, testLocalToken)), chromedp.WaitVisible(chromedp.ID("session-form")),
		chromedp.SendKeys(chromedp.ID("new-session-name"), "cells"), chromedp.Click(chromedp.ID("new-session")),
		chromedp.WaitVisible(chromedp.ID("cell-form"))); err != nil {
		t.Fatalf("browser: %v", err)
	}
	runCell("df = pd.DataFrame({'Product': ['a', 'b', 'a'], 'Revenue': [1.5, 2.0, 3.0]})\nprint('loaded', len(df))")
	poll("the first cell", `document.querySelector("#cells pre.out") && document.querySelector("#cells pre.out").textContent === "loaded 3\n"`)
	runCell("df.groupby('Product', as_index=False)['Revenue'].sum()")
	poll("the table", `(() => { const t = document.querySelector("#cells table.df"); return !!t && t.textContent.includes("4.5"); })()`)
	runCell("df.plot(x='Product', y='Revenue', kind='bar')")
	poll("the figure", `(() => { const i = document.querySelector("#cells figure img"); return !!i && i.complete && i.naturalWidth > 0; })()`)
	poll("the kernel's status", `document.getElementById("kernel-status").textContent.startsWith("kernel alive")`)
	runCell(`class Evil:
    def _repr_html_(self):
        return '<img src=x onerror="window.pwned=1"><script>window.pwned=2</script><table><tr><td onclick="window.pwned=3">safe</td></tr></table>'
Evil()`)
	poll("the hostile cell's table", `document.querySelector("#cells li table.df") && document.querySelector("#cells li table.df").textContent === "safe"`)
	pwned, err := chromedp.Run(bctx, chromedp.Evaluate[bool](`window.pwned !== undefined || document.querySelectorAll("#cells script, #cells [onerror], #cells [onclick]").length > 0`))
	if err != nil || pwned {
		t.Fatalf("the cell's HTML ran or was inserted (%v)", err)
	}
	if err := chromedp.Do(bctx, chromedp.Click(chromedp.ID("kernel-restart"))); err != nil {
		t.Fatal(err)
	}
	poll("the restart", `document.getElementById("kernel-status").textContent === "no kernel running"`)
	runCell("'df' in globals()")
	poll("the restarted kernel", `document.querySelector("#cells li p.bad") && document.querySelector("#cells li p.bad").textContent.includes("restart")`)
	if text, _ := chromedp.Run(bctx, chromedp.Text(`#cells li pre.result`)); !strings.Contains(text, "False") {
		t.Errorf("after the restart: %q", text)
	}
}
