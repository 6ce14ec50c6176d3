package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/codeagent/codeagent/internal/proctest"
)

// TestServeKilledLeavesNoSandbox kills `codeagent serve` (SIGKILL) at
// random moments while it fills its pools, hands sandboxes and warm
// interpreters out to executions and refills them, and checks each time
// that a second later no process of a sandbox is left orphaned (re-
// parented to init): whatever the server started ahead dies with it.
func TestServeKilledLeavesNoSandbox(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("as root, sandboxes run as host uids of their own, by which the test finds them")
	}
	const rounds = 4
	body, _ := json.Marshal(map[string]string{"language": "python", "code": "import pandas\nprint(pandas.__name__)"})
	plain, _ := json.Marshal(map[string]string{"language": "python", "code": "print(1)"})
	for i := range rounds {
		after := time.Duration(rand.Int64N(int64(1500 * time.Millisecond)))
		t.Run(fmt.Sprintf("%d-after-%dms", i, after.Milliseconds()), func(t *testing.T) {
			p := startServeBin(t, t.TempDir(), "--data-dir", t.TempDir(), "--rate", "1000")
			for _, b := range [][]byte{body, plain, body, plain} {
				go func() {
					resp, err := http.Post(p.base+"/v1/exec", "application/json", bytes.NewReader(b))
					if err == nil {
						resp.Body.Close()
					}
				}()
			}
			time.Sleep(after)
			_ = p.cmd.Process.Signal(syscall.SIGKILL)
			<-p.exited
			killed := time.Now()
			var left []string
			for time.Since(killed) < time.Second {
				if left = orphanedSandboxProcesses(); len(left) == 0 {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			if len(left) > 0 {
				for _, l := range left { // bounded clean-up, then the verdict
					pid, _ := strconv.Atoi(strings.Fields(l)[0])
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
				t.Fatalf("a second after serve was killed, sandbox processes live on under init:\n%s", strings.Join(left, "\n"))
			}
		})
	}
}

// orphanedSandboxProcesses lists the live processes that run as a
// sandbox's host uid and whose parent is init.
func orphanedSandboxProcesses() []string {
	var out []string
	for _, p := range proctest.Live(2_000_000_000, 65536) {
		if p.PPID == 1 {
			out = append(out, p.String())
		}
	}
	return out
}
