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
	check := func(err error, want, not string) {
		t.Helper()
		got := toolError(err).Error()
		if !strings.Contains(got, want) || (not != "" && strings.Contains(got, not)) {
			t.Errorf("toolError(%v) = %q, want it to contain %q", err, got, want)
		}
	}
	check(argError("code is empty"), "invalid arguments: code is empty", "")
	check(fmt.Errorf("execute_code: %w", argError("code is empty")), "invalid arguments: execute_code: code is empty", "")
	check(&kernel.BusyError{Max: 2, RetryAfter: 1500 * time.Millisecond}, "(try again in 2 s)", "")
	check(fmt.Errorf("open /tmp/codeagent-mcp-1/x: no such file"), "open [path]", "/tmp")
}
