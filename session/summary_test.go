package session

import (
	"strings"
	"testing"

	"github.com/codeagent/codeagent/store"
)

func TestSummaryKeepsTheLatestTurnWhole(t *testing.T) {
	var turns []store.Turn
	for i := 1; i <= 6; i++ {
		turns = append(turns, store.Turn{Seq: i, Status: store.TurnSucceeded, Task: "task " + strings.Repeat("x", i),
			Code: strings.Repeat("print(1)\n", 400), Output: "out", Artifacts: []store.Artifact{{Path: "f.csv"}}})
	}
	s := Summary(turns)
	if len(s) > historyBudget+200 {
		t.Fatalf("summary of %d bytes over the budget of %d", len(s), historyBudget)
	}
	if !strings.Contains(s, "Turn 6 (succeeded): task xxxxxx") || !strings.Contains(s, "Its final program") {
		t.Fatalf("the latest turn or its code is missing:\n%s", s)
	}
	if strings.Count(s, "Its final program") == 6 {
		t.Fatal("no code was dropped although the whole did not fit")
	}
	if !strings.Contains(s, "[... ") {
		t.Fatal("long code was not clipped")
	}
}

func TestSummaryOfNothing(t *testing.T) {
	if s := Summary(nil); s != "" {
		t.Fatalf("%q", s)
	}
}
