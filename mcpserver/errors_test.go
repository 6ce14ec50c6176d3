package mcpserver

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/codeagent/codeagent/kernel"
)

// TestToolError: a tool error says what its class asks of the model:
// fix the arguments, or call again later; never a host path.
func TestToolError(t *testing.T) {
	for _, c := range []struct {
		err       error
		want, not string
	}{
		{argError("code is empty"), "invalid arguments: code is empty", ""},
		{fmt.Errorf("execute_code: %w", argError("code is empty")), "invalid arguments: execute_code: code is empty", ""},
		{&kernel.BusyError{Max: 2, RetryAfter: 1500 * time.Millisecond}, "(try again in 2 s)", ""},
		{fmt.Errorf("open /tmp/codeagent-mcp-1/x: no such file"), "open [path]", "/tmp"},
	} {
		got := toolError(c.err).Error()
		if !strings.Contains(got, c.want) || (c.not != "" && strings.Contains(got, c.not)) {
			t.Errorf("toolError(%v) = %q, want it to contain %q", c.err, got, c.want)
		}
	}
}
