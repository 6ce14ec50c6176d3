package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestEnvsPruneMaxZero: `envs prune --max 0` removes every environment
// not in use, as its help says (the flag refused 0: "size must be
// positive", exit 2); a negative size is still refused.
func TestEnvsPruneMaxZero(t *testing.T) {
	ix := birdIndex(t)
	data := t.TempDir()
	prog := writeProgram(t, "prog.py", "import gull\nprint(gull.TWO)\n")
	for _, req := range []string{"gull==0.7", "seabird==1.0"} {
		code, out, errOut := runCLI(t, "", "exec", "--data-dir", data, "--index-url", ix.URL(), "--require", req, prog)
		if code != 0 || strings.TrimSpace(out) != "2" {
			t.Fatalf("exec --require %s: exit %d, %q, %s", req, code, out, errOut)
		}
	}
	count := func() int {
		t.Helper()
		code, out, errOut := runCLI(t, "", "envs", "list", "--json", "--data-dir", data)
		var envs []json.RawMessage
		if err := json.Unmarshal([]byte(out), &envs); code != 0 || err != nil {
			t.Fatalf("envs list: exit %d, %v, %s", code, err, errOut)
		}
		return len(envs)
	}
	if n := count(); n != 2 {
		t.Fatalf("%d environments installed, want 2", n)
	}
	if code, _, errOut := runCLI(t, "", "envs", "prune", "--max", "-1", "--data-dir", data); code != exitUsage {
		t.Errorf("--max -1: exit %d, %s", code, errOut)
	}
	code, out, errOut := runCLI(t, "", "envs", "prune", "--max", "0", "--data-dir", data)
	if code != 0 || !strings.HasPrefix(out, "removed 2 environment(s)") {
		t.Fatalf("envs prune --max 0: exit %d, %q, %s", code, out, errOut)
	}
	if n := count(); n != 0 {
		t.Errorf("%d environments left after prune --max 0", n)
	}
}
