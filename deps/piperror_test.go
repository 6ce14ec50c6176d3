package deps

import (
	"strings"
	"testing"

	"github.com/codeagent/codeagent/sandbox"
)

// TestPipErrorNamesTheCause: pip's own failure ("ERROR: Exception:" and a
// traceback) is reported by the traceback's last line, not as
// "Exception:" alone; pip's ordinary errors are reported as they are.
func TestPipErrorNamesTheCause(t *testing.T) {
	tb := " ERROR: Exception:\nTraceback (most recent call last):\n  File \"x\", line 1\nshutil.Error: [Errno 1] Operation not permitted: '/workspace/site/x'\n"
	if got := pipError(tb, sandbox.Result{}); !strings.Contains(got, "Operation not permitted") {
		t.Errorf("pip's traceback: %q", got)
	}
	nf := "ERROR: Could not find a version that satisfies the requirement nosuch (from versions: none)\nERROR: No matching distribution found for nosuch\n"
	if got := pipError(nf, sandbox.Result{}); !strings.Contains(got, "No matching distribution found for nosuch") || !strings.HasPrefix(got, "Could not find") {
		t.Errorf("pip's error lines: %q", got)
	}
}
