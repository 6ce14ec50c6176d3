package sandboxtest

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/codeagent/codeagent/sandbox"
)

// renameStorm renames directories into each other's places as fast as it
// can, writing between the renames, so that a backend's disk watcher reads
// the events out of order. A watcher that let its account of the tree
// take a cycle walked it forever, growing until the host ran out of memory
// (codeagent's own process, outside every limit of the sandbox). The run
// must end as usual, and the host process must not grow: a guard aborts
// the test binary if it grows by more than 2 GiB, so that a regression
// cannot exhaust the host. Bounded: 3 s or 20 000 rounds.
func renameStorm(t *testing.T, sb sandbox.Sandbox) {
	base := rssBytes()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			if grew := rssBytes() - base; grew > 2<<30 {
				panic(fmt.Sprintf("RenameStorm: this process grew by %d MiB during the run: stopping before the host runs out of memory", grew>>20))
			}
		}
	}()
	mark := marker()
	res := execute(t, sb, program{lang: "python", mark: mark, limits: sandbox.Limits{WallTime: 20 * time.Second}, code: `
import os, time
os.makedirs('a/b/c')
t0, n = time.time(), 0
while n < 20000 and time.time() - t0 < 3:
    os.rename('a/b', 'b'); os.rename('a', 'b/a')
    with open('b/a/f', 'w') as f:
        f.write('x')
    os.rename('b/a', 'a'); os.rename('b', 'a/b')
    n += 1
print('done', n)
`})
	close(stop)
	wg.Wait()
	assertNoProcesses(t, mark)
	wantStatus(t, res, sandbox.StatusOK)
	if !strings.Contains(string(res.Stdout), "done") {
		t.Fatalf("the program did not finish: %s %s", res.Stdout, res.Stderr)
	}
	grew := rssBytes() - base
	t.Logf("%s; this process grew by %.1f MiB", strings.TrimSpace(string(res.Stdout)), mib(grew))
	if grew > 256<<20 {
		t.Fatalf("this process grew by %.1f MiB during the run", mib(grew))
	}
}

// rssBytes is this process's resident set size.
func rssBytes() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseInt(f[1], 10, 64)
	return pages * int64(os.Getpagesize())
}
