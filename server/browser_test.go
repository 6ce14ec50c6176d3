package server

import (
	"context"
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

// TestServeBrowserUploadRunAndChart drives the page in headless Chromium:
// create a session, upload a CSV, run a task, and see the PNG rendered.
// With CODEAGENT_SCREENSHOT=FILE it saves a screenshot of the page there.
func TestServeBrowserUploadRunAndChart(t *testing.T) {
	bin := chromium(t)
	ts := newTestServer(t, testOptions{replies: []llmtest.Reply{
		pyReply("import pandas as pd\n\ndf = pd.read_csv(\"sales.csv\")\nprint(df[\"qty\"].sum())\n"), // repaired next
		pyReply(plotProgram), llmtest.Say(verifyOK)}})
	csv := filepath.Join(t.TempDir(), "sales.csv")
	if err := os.WriteFile(csv, []byte(salesCSV), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(bin), chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 1100),
		chromedp.Flag("headless", true), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
	}
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	defer acancel()
	bctx, bcancel := chromedp.NewContext(actx)
	defer bcancel()

	const imgLoaded = `(() => { const i = document.querySelector("#artifacts img"); return !!i && i.complete && i.naturalWidth > 0; })()`
	err := chromedp.Do(bctx,
		chromedp.Navigate(ts.URL),
		chromedp.WaitVisible(chromedp.ID("session-form")),
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
