package agent

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/codeagent/codeagent/llm/llmtest"
	"github.com/codeagent/codeagent/sandbox"
)

// TestProgramCarriesItsImports: each attempt's program run tells the
// sandbox what it imports (which lets the namespace backend keep its warm
// interpreters for the programs that use them); a test run does not.
func TestProgramCarriesItsImports(t *testing.T) {
	p := llmtest.NewFake(fence("import json\nprint(json.dumps(1))\n"), fence("import pandas\nprint(pandas.__name__)\n"))
	var mu sync.Mutex
	var seen [][]string
	sb := &fakeSandbox{fn: func(_ context.Context, spec sandbox.Spec, n int) sandbox.Result {
		mu.Lock()
		seen = append(seen, spec.Imports)
		mu.Unlock()
		if n == 1 {
			return failWith("Traceback (most recent call last):\nValueError: not yet\n")
		}
		return okWith("pandas\n")
	}}
	a, ws := fakeAgent(t, Config{Verify: false}, p, sb, nil)
	if res, err := a.Run(context.Background(), Task{Prompt: "print something", Workspace: ws}); err != nil || !res.Success {
		t.Fatalf("err %v, res %+v", err, res)
	}
	if len(seen) != 2 || !slices.Equal(seen[0], []string{"json"}) || !slices.Equal(seen[1], []string{"pandas"}) {
		t.Fatalf("imports told the sandbox: %q, want [json] then [pandas]", seen)
	}
}
