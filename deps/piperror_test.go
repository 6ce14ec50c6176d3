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
	if got := pipError(nf, sandbox.Result{}); got != "no such package on the index, or no wheel of it for this platform: nosuch" {
		t.Errorf("no version at all: %q", got)
	}
	nv := "ERROR: Could not find a version that satisfies the requirement tern==2.0 (from versions: 1.0, 1.1)\nERROR: No matching distribution found for tern==2.0\n"
	if got := pipError(nv, sandbox.Result{}); got != "no matching version of tern==2.0: the index has 1.0, 1.1" {
		t.Errorf("no matching version: %q", got)
	}
	cf := "ERROR: Cannot install a==1 and b==2 because these package versions have conflicting dependencies.\n"
	if got := pipError(cf, sandbox.Result{}); !strings.HasPrefix(got, "Cannot install a==1 and b==2") {
		t.Errorf("pip's own words: %q", got)
	}
}
