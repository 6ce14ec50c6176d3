package agent

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/codeagent/codeagent/workspace"
)

// TestDeliverables: the files a task names that the workspace does not
// hold yet are what the program must write; the inputs it holds are not.
func TestDeliverables(t *testing.T) {
	before := workspace.Snapshot{Files: map[string]workspace.FileState{"sales.csv": {}}}
	got := deliverables("Analyze sales.csv, save the plot as revenue_trend.png and write the summary to out/report.txt "+
		"(`top.json` too); revenue_trend.png again, v1.2 and example.com are not files", before)
	if want := []string{"revenue_trend.png", "out/report.txt", "top.json"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("deliverables = %q, want %q", got, want)
	}
}

// A program that runs but does not write the file the task names is not
// done (it was accepted as a success): the model is told what is missing,
// before any verifier, and the next program that writes it succeeds.
func TestMissingDeliverableIsFedBack(t *testing.T) {
	a, srv, ws, _ := setup(t, Config{MaxIterations: 3}, map[string]string{"data.csv": "x\n1\n2\n"},
		py("import pandas as pd\nprint(pd.read_csv('data.csv').x.sum())\n"),
		py("import pandas as pd\ns = pd.read_csv('data.csv').x.sum()\nopen('total.txt', 'w').write(str(s))\nprint(s)\n"),
		verdict(true, ""))
	res, err := a.Run(context.Background(), Task{Prompt: "Sum column x of data.csv and save it to total.txt", Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Success || res.Attempts != 2 || res.History[0].ErrorClass != ClassIncomplete {
		t.Fatalf("success %v after %d attempts, first %s: %s", res.Success, res.Attempts, res.History[0].ErrorClass, res.Message)
	}
	if req := srv.Requests()[1].Text(); !strings.Contains(req, "the task names files the program did not write: total.txt") {
		t.Fatalf("the repair request does not name the missing file:\n%s", req)
	}
}
