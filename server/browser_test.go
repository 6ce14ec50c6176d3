package server

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/codeagent/codeagent/llm/llmtest"
)

// chromium returns the path of a headless-capable Chromium, skipping the
// test when there is none outside CI (scripts/install-deps.sh installs it).
func chromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("chromium is required in CI: run scripts/install-deps.sh")
	}
	t.Skip("chromium is not installed (apt-get install chromium); the browser test runs in CI")
	return ""
}

// browser starts headless Chromium for the test; hosts it resolves to
// 127.0.0.1 stand for a DNS-rebinding or attacker site.
func browser(t *testing.T, bin string, hosts ...string) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(bin), chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 1100),
		chromedp.Flag("headless", true), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
	}
	if len(hosts) > 0 {
		var rules []string
		for _, h := range hosts {
			rules = append(rules, "MAP "+h+" 127.0.0.1")
		}
		opts = append(opts, chromedp.Flag("host-resolver-rules", strings.Join(rules, ", ")))
	}
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(acancel)
	bctx, bcancel := chromedp.NewContext(actx)
	t.Cleanup(bcancel)
	return bctx
}

// TestServeBrowserUploadRunAndChart drives the page in headless Chromium
// on a server with a local token, as `codeagent serve` starts one: open
// the address it prints (the token leaves the address bar, and scripts
// cannot read the cookie that replaces it), create a session, upload a
// CSV, run a task, and see the PNG rendered. With CODEAGENT_SCREENSHOT=FILE
// it saves a screenshot of the page there.
func TestServeBrowserUploadRunAndChart(t *testing.T) {
	bin := chromium(t)
	ts := newTestServer(t, testOptions{cfg: Config{LocalToken: testLocalToken}, replies: []llmtest.Reply{
		pyReply("import pandas as pd\n\ndf = pd.read_csv(\"sales.csv\")\nprint(df[\"qty\"].sum())\n"), // repaired next
		pyReply(plotProgram), llmtest.Say(verifyOK)}})
	csv := filepath.Join(t.TempDir(), "sales.csv")
	if err := os.WriteFile(csv, []byte(salesCSV), 0o644); err != nil {
		t.Fatal(err)
	}
	bctx := browser(t, bin)
	const imgLoaded = `(() => { const i = document.querySelector("#artifacts img"); return !!i && i.complete && i.naturalWidth > 0; })()`
	if err := chromedp.Do(bctx, chromedp.Navigate(TokenURL(ts.URL, testLocalToken)), chromedp.WaitVisible(chromedp.ID("session-form"))); err != nil {
		t.Fatalf("browser: %v", err)
	}
	where, err := chromedp.Run(bctx, chromedp.Evaluate[string](`location.href + " " + document.cookie`))
	if err != nil || where != ts.URL+"/ " {
		t.Errorf("after the printed address: at %q (the address, then the cookies scripts see), %v", where, err)
	}
	err = chromedp.Do(bctx,
		chromedp.SendKeys(chromedp.ID("new-session-name"), "sales"),
		chromedp.Click(chromedp.ID("new-session")),
		chromedp.WaitVisible(chromedp.ID("workspace")),
		chromedp.SetUploadFiles(chromedp.ID("file-input"), []string{csv}),
		chromedp.Click(chromedp.ID("upload")),
		chromedp.WaitVisible(chromedp.Search(`//ul[@id="files"]//button[text()="sales.csv"]`)),
		chromedp.SendKeys(chromedp.ID("task"), "Plot the monthly revenue of sales.csv and save it as revenue.png"),
		chromedp.Click(chromedp.ID("run")),
	)
	if err != nil {
		t.Fatalf("browser: %v", err)
	}
	loaded, err := chromedp.Run(bctx, chromedp.Poll[bool](imgLoaded,
		chromedp.WithPollingTimeout(90*time.Second), chromedp.WithPollingInterval(100*time.Millisecond)))
	outcome, _ := chromedp.Run(bctx, chromedp.Text(chromedp.ID("outcome")))
	if err != nil || !loaded {
		progress, _ := chromedp.Run(bctx, chromedp.Text(chromedp.ID("progress")))
		t.Fatalf("the chart did not appear: %v; outcome %q, progress %q", err, outcome, progress)
	}
	highlighted, err := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll("#progress .tok-keyword").length`))
	if err != nil || highlighted == 0 || !strings.Contains(outcome, "Done after 2") {
		t.Errorf("page: outcome %q, highlighted tokens %d (%v)", outcome, highlighted, err)
	}
	if asked, err := chromedp.Run(bctx, chromedp.Evaluate[bool](`!document.getElementById("key-form").hidden`)); err != nil || asked {
		t.Errorf("the page asked for an API key though its cookie let it in (%v)", err)
	}
	if out := os.Getenv("CODEAGENT_SCREENSHOT"); out != "" {
		png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot: %v", err)
		}
		if err := os.WriteFile(out, png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// attackerPage posts to the server from another origin, with the
// browser's cookies, in the three ways a page can without the user's help:
// a text/plain form (which needs no preflight), no-cors fetches, and a
// JSON fetch (which needs a preflight).
const attackerPage = `<!doctype html><title>cute cats</title>
<iframe name="sink"></iframe>
<form id="f" method="post" enctype="text/plain" action="%[1]s/v1/exec" target="sink">
<input name='{"language":"bash","code":"echo pwned","stdin":"' value='"}'></form>
<script>
document.getElementById("f").submit();
const exec = '{"language":"bash","code":"echo pwned"}';
Promise.allSettled([
  fetch("%[1]s/v1/exec", {method: "POST", mode: "no-cors", credentials: "include", body: exec}),
  fetch("%[1]s/v1/exec", {method: "POST", credentials: "include", headers: {"Content-Type": "application/json"}, body: exec}),
  fetch("%[1]s/v1/sessions", {method: "POST", mode: "no-cors", credentials: "include", body: new FormData()}),
  fetch("%[1]s/v1/sessions", {mode: "no-cors", credentials: "include"}),
]).then((r) => { window.attacked = r.map((x) => x.status).join(","); });
</script>`

// TestServeBrowserRefusesCrossSiteAndRebinding is the attacker's side in a
// real browser whose user has opened the server's page (so the browser
// holds its token cookie): a page on another site, and one on another port
// of 127.0.0.1 (same site: the cookie goes with its requests), post to the
// server, and a DNS-rebinding name resolving to 127.0.0.1 tries to read
// its sessions. All are refused, and nothing runs.
func TestServeBrowserRefusesCrossSiteAndRebinding(t *testing.T) {
	bin := chromium(t)
	ts := newTestServer(t, testOptions{cfg: Config{LocalToken: testLocalToken}, noModel: true})
	victim := ts.createSession(t, testLocalToken, "victim-session")
	u, _ := url.Parse(ts.URL)
	attacker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, attackerPage, ts.URL)
	}))
	defer attacker.Close()
	au, _ := url.Parse(attacker.URL)
	bctx := browser(t, bin, "attacker.example", "evil.example")
	if err := chromedp.Do(bctx, chromedp.Navigate(TokenURL(ts.URL, testLocalToken)), chromedp.WaitVisible(chromedp.ID("session-form"))); err != nil {
		t.Fatalf("the server's page: %v", err)
	}

	refused := func() int {
		_, m := ts.do(t, "GET", "/metrics", testLocalToken, nil)
		var n int
		for _, line := range strings.Split(string(m), "\n") {
			fmt.Sscanf(line, `codeagent_http_requests_total{code="403"} %d`, &n)
		}
		return n
	}
	for _, page := range []string{"http://attacker.example:" + au.Port() + "/", attacker.URL + "/"} {
		before := refused()
		if err := chromedp.Do(bctx, chromedp.Navigate(page)); err != nil {
			t.Fatalf("attacker page %s: %v", page, err)
		}
		attacked, err := chromedp.Run(bctx, chromedp.Poll[string](`window.attacked`, chromedp.WithPollingTimeout(30*time.Second)))
		if err != nil {
			t.Fatalf("attacker page %s: %v", page, err)
		}
		// The form navigates the frame; wait for the server to have answered it.
		for deadline := time.Now().Add(20 * time.Second); refused()-before < 4 && time.Now().Before(deadline); {
			time.Sleep(50 * time.Millisecond)
		}
		if n := refused() - before; n < 4 {
			t.Errorf("%s: %d cross-origin requests refused, want the form, the no-cors fetches and the preflight (fetches: %s)", page, n, attacked)
		}
	}

	// DNS rebinding: evil.example resolves to 127.0.0.1, so its page is
	// same-origin with the server's port; it must not see the sessions.
	rebound := "http://evil.example:" + u.Port()
	if err := chromedp.Do(bctx, chromedp.Navigate(rebound+"/")); err != nil {
		t.Fatalf("rebinding page: %v", err)
	}
	status, err := chromedp.Run(bctx, chromedp.Evaluate[string](`fetch("/v1/sessions").then(async (r) => r.status + " " + await r.text())`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("rebinding page: %v", err)
	}
	if !strings.HasPrefix(status, "421 ") || strings.Contains(status, victim.ID) {
		t.Errorf("a DNS-rebinding page read /v1/sessions: %s", status)
	}
	_, m := ts.do(t, "GET", "/metrics", testLocalToken, nil)
	if strings.Contains(string(m), `codeagent_executions_total{`) {
		t.Errorf("an execution ran:\n%s", m)
	}
	var list struct{ Sessions []sessionJSON }
	ts.json(t, "GET", "/v1/sessions", testLocalToken, nil, 200, &list)
	if len(list.Sessions) != 1 {
		t.Errorf("sessions %+v", list.Sessions)
	}
}
