package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
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

// orphanedSandboxProcesses lists the live processes that run as a sandbox's
// host uid (2000000000-2000065535) and whose parent is init, as "pid name".
func orphanedSandboxProcesses() []string {
	files, _ := filepath.Glob("/proc/[0-9]*/status")
	var out []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		var name, state, ppid string
		uid := -1
		for _, line := range strings.Split(string(b), "\n") {
			k, v, _ := strings.Cut(line, ":")
			v = strings.TrimSpace(v)
			switch k {
			case "Name":
				name = v
			case "State":
				state = v
			case "PPid":
				ppid = v
			case "Uid":
				if f := strings.Fields(v); len(f) > 0 {
					uid, _ = strconv.Atoi(f[0])
				}
			}
		}
		if uid >= 2_000_000_000 && uid < 2_000_065_536 && ppid == "1" && !strings.HasPrefix(state, "Z") {
			out = append(out, strings.Split(f, "/")[2]+" "+name)
		}
	}
	return out
}
