package session

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/codeagent/codeagent/agent"
	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/store"
)

// BenchmarkRecorderIteration measures what recording adds to one agent
// iteration: the generated, checked, executed and verified events written
// to a real SQLite store (an attempt row and an audit record each).
func BenchmarkRecorderIteration(b *testing.B) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(b.TempDir(), "codeagent.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	sess, _ := st.CreateSession(ctx, "bench", b.TempDir())
	turn, _ := st.BeginTurn(ctx, sess.ID, "task")
	rec := NewRecorder(ctx, st, "bench", turn.ID, turn.ID, nil)
	safe := true
	res := &sandbox.ResultJSON{Status: "error", ExitCode: 1, Stdout: "some output\n", Stderr: "Traceback ...\nNameError: x\n", WallMS: 20}
	now := time.Now()
	b.ResetTimer()
	for i := range b.N {
		rec.Event(agent.Event{Type: agent.EventAttemptStart, Attempt: i + 1, Time: now})
		rec.Event(agent.Event{Type: agent.EventGenerated, Attempt: i + 1, Code: "import pandas as pd\nprint(x)\n"})
		rec.Event(agent.Event{Type: agent.EventChecked, Attempt: i + 1, Safe: &safe})
		rec.Event(agent.Event{Type: agent.EventExecuted, Attempt: i + 1, Result: res, ErrorClass: agent.ClassName})
		rec.Event(agent.Event{Type: agent.EventVerified, Attempt: i + 1, Verdict: &agent.Verdict{}})
	}
}
