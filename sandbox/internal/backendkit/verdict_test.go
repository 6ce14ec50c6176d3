package backendkit

import (
	"strings"
	"testing"

	"github.com/codeagent/codeagent/sandbox"
)

func TestVerdict(t *testing.T) {
	lim := sandbox.DefaultLimits().WithDefaults()
	cases := []struct {
		name      string
		killed    KillReason
		oom       bool
		code      int
		status    sandbox.Status
		signal    int
		exit      int
		inMessage string
	}{
		{"ok", NotKilled, false, 0, sandbox.StatusOK, 0, 0, ""},
		{"error", NotKilled, false, 3, sandbox.StatusError, 0, 3, ""},
		{"segfault", NotKilled, false, 139, sandbox.StatusSignaled, 11, 139, "SIGSEGV"},
		{"cpu limit", NotKilled, false, 128 + 24, sandbox.StatusTimeout, 24, 124, "CPU-time"},
		{"timeout wins over its SIGKILL", KilledTimeout, false, 137, sandbox.StatusTimeout, 9, 124, "wall-clock"},
		{"memory", NotKilled, true, 137, sandbox.StatusMemoryLimit, 9, 137, "256 MiB"},
		{"disk", KilledDisk, false, 137, sandbox.StatusSignaled, 25, 153, "disk limit"},
		{"cancel", KilledCancel, false, 137, sandbox.StatusSignaled, 9, 137, "cancelled"},
		{"abnormal", NotKilled, false, -1, sandbox.StatusSignaled, 0, 137, "abnormally"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var r sandbox.Result
			Verdict(&r, lim, tc.killed, tc.oom, tc.code)
			if r.Status != tc.status || r.Signal != tc.signal || r.ExitStatus() != tc.exit {
				t.Fatalf("got %s signal %d exit %d, want %s %d %d", r.Status, r.Signal, r.ExitStatus(), tc.status, tc.signal, tc.exit)
			}
			if tc.inMessage != "" && !strings.Contains(r.Message, tc.inMessage) {
				t.Fatalf("message %q lacks %q", r.Message, tc.inMessage)
			}
		})
	}
}
