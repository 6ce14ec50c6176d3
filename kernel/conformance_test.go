package kernel

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/codeagent/codeagent/lang"
	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/sandbox/namespace"
	"github.com/codeagent/codeagent/sandbox/sandboxtest"
)

// cellSandbox runs each program of the conformance suite as a cell of a
// fresh kernel whose limits are the program's (its wall-clock limit is the
// cell's): a Python program run plainly (python3 FILE) is the cell's
// code, run by the kernel's own interpreter; another command (a traced
// one, another language's) is run by a cell through subprocess, with the
// program's environment and stdin. The kernel is closed before Run returns, and the
// suite then checks the host.
type cellSandbox struct {
	sb sandbox.Sandbox
	t  *testing.T
}

func (c cellSandbox) Close() error { return nil }

func (c cellSandbox) Run(ctx context.Context, spec sandbox.Spec) (sandbox.Result, error) {
	lim := spec.Limits.WithDefaults()
	klim := lim
	klim.WallTime = lim.WallTime + time.Minute // the kernel's life
	klim.CPUTime = spec.Limits.CPUTime         // its CPU budget: the program's, or the default
	t0 := time.Now()
	k, err := Start(ctx, Options{Sandbox: c.sb, Workspace: spec.Workspace, Limits: klim, Env: spec.Env, Files: spec.Files, Binds: spec.Binds})
	if err != nil {
		return sandbox.Result{Status: sandbox.StatusSandboxError}, err
	}
	t1 := time.Now()
	t2 := t1
	defer func() {
		k.Close("closed")
		if total := time.Since(t0); total > lim.WallTime {
			c.t.Logf("kernel start %v, cell %v, close %v", t1.Sub(t0), t2.Sub(t1), time.Since(t2))
		}
	}()
	var stdin []byte
	if spec.Stdin != nil {
		stdin, _ = io.ReadAll(spec.Stdin)
	}
	code := ""
	if spec.Command[0] == "python3" && len(spec.Command) == 2 && len(spec.Files) == 1 {
		code = string(spec.Files[0].Data)
	} else {
		args := make([]string, len(spec.Command))
		for i, a := range spec.Command {
			args[i] = strconv.Quote(a) // a Python string literal too, for the suite's commands
		}
		var drop []string // what the kernel adds to the environment for Python
		for k := range pythonEnv() {
			if _, ok := spec.Env[k]; !ok {
				drop = append(drop, strconv.Quote(k))
			}
		}
		code = fmt.Sprintf(`import os, subprocess, sys
_env = {k: v for k, v in os.environ.items() if k not in [%s]}
_r = subprocess.run([%s], input=bytes.fromhex(%q), env=_env)
if _r.returncode < 0:
    os.kill(os.getpid(), -_r.returncode)
sys.exit(_r.returncode)
`, strings.Join(drop, ", "), strings.Join(args, ", "), hex.EncodeToString(stdin))
		stdin = nil
	}
	res, err := k.Exec(ctx, Cell{Code: code, Stdin: string(stdin), Timeout: lim.WallTime})
	t2 = time.Now()
	return res.Result, err
}

// pythonEnv is what a kernel adds to its sandbox's environment.
func pythonEnv() map[string]string {
	py, _ := lang.Lookup("python")
	return py.Env
}

// warmUp fills b's pool of warm interpreters: a first Python program runs
// cold and starts the pool, which then fills in the background.
func warmUp(t *testing.T, b *namespace.Backend) {
	t.Helper()
	ws := t.TempDir()
	spec := sandbox.Spec{Command: []string{"python3", "-c", "pass"}, Workspace: ws, Env: pythonEnv()}
	for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); time.Sleep(time.Second) {
		before := b.WarmRuns()
		if _, err := b.Run(context.Background(), spec); err != nil {
			t.Fatal(err)
		}
		if b.WarmRuns() > before {
			return
		}
	}
	t.Fatal("no warm interpreter became ready")
}

// TestConformanceAsCells runs the whole conformance suite, its attacks
// included, as cells of kernels, with the reactive disk limit that
// kernels have.
func TestConformanceAsCells(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode")
	}
	// Kernels start in warm interpreters; the suite's programs follow
	// each other quickly, so the pool is large.
	b, err := namespace.New(namespace.Config{Warm: 2, WarmPython: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	warmUp(t, b)
	time.Sleep(5 * time.Second) // the rest of the pool
	// As root a kernel works on a copy of its workspace on a file system
	// of the disk limit's size (Spec.LiveWorkspace), so its disk limit
	// holds by construction; where the backend binds workspaces
	// themselves, the disk watcher bounds it. A kernel has no network.
	sandboxtest.RunWith(t, cellSandbox{b, t}, sandboxtest.Features{ReactiveDisk: b.ReactiveDisk(), NoNetwork: true, WholeStdin: true, KernelPerRun: true})
	t.Logf("%d kernels started warm", b.WarmRuns())
}
