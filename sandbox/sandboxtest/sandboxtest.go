// Package sandboxtest is the conformance suite that every sandbox backend
// must pass: benign programs behave as on a normal host, and attacks, run
// for real inside the sandbox, are contained, with the host checked
// afterwards. Every attack bounds itself by a limit or a deadline, so that a
// broken sandbox fails a test instead of harming the machine.
package sandboxtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/codeagent/codeagent/egress"
	"github.com/codeagent/codeagent/lang"
	"github.com/codeagent/codeagent/sandbox"
)

// Run runs the whole suite against sb, which enforces every limit for the
// whole sandbox (cgroups or the engine's equivalent).
func Run(t *testing.T, sb sandbox.Sandbox) { RunWith(t, sb, Features{}) }

// Features describe a backend that enforces less on this host, so that the
// suite expects the verdicts it can give and skips what it cannot do.
type Features struct {
	// RlimitsOnly: no cgroup, so memory and processes are limited per
	// process by rlimits (an allocation fails instead of the sandbox being
	// killed) and there is no CPU quota.
	RlimitsOnly bool
	// ReactiveDisk: the workspace disk limit rests on a watcher that kills
	// the program once it is past the limit, not on a file system or quota
	// of the limit's size that refuses the writes (the namespace backend
	// run by an ordinary user). The disk attacks then allow the documented
	// overshoot of that mode (reactiveDiskBound) and skip the attacks that
	// only a size-limited file system stops.
	ReactiveDisk bool
	// CopyBack: the program's writes reach the workspace in a copy after
	// it has ended (the Docker backend's copy back, the namespace
	// backend's merge of an overlay as root), which takes what writing
	// them there would have taken, outside the wall-time limit. The suite
	// then checks that the program itself stopped in time and allows Run
	// copyBackAllowance more.
	CopyBack bool
	// KernelPerRun: each Run starts a kernel, runs the program as one of
	// its cells and closes it (package kernel's suite); the kernel's start
	// and close lie outside the program's wall-time limit as a copy back
	// does, and are allowed for alike: the program itself must stop in
	// time (under load a kernel took over 1 s to start).
	KernelPerRun bool
	// NoNetwork: the sandbox never offers a network, whatever the spec
	// asks (a kernel's cells): of the egress suite only the check that
	// there is none runs.
	NoNetwork bool
	// SharedHostUID: every sandbox runs as one host uid (the Kubernetes
	// backend's Pods; the Docker backend run by an ordinary user), so
	// sandboxes share that uid's kernel quotas: PerSandboxQuota skips.
	SharedHostUID bool
	// WholeStdin: the program's standard input is read whole before it
	// runs and its output arrives at its end (a kernel's cells), so a
	// program cannot be held on its stdin while the suite acts beside it.
	WholeStdin bool
}

// copyBackAllowance is how much longer than its wall-time limit plus one
// second Run may take with Features.CopyBack: on a loaded two-core machine
// the namespace backend took up to 5 s to merge 19 000 new files and 45
// MiB (the file system of the workspace taking up to 0.9 ms per file).
const copyBackAllowance = 20 * time.Second

// RunWith runs the whole suite against sb with features f.
func RunWith(t *testing.T, sb sandbox.Sandbox, f Features) {
	sb = withFeatures{sb, f}
	t.Run("Benign", func(t *testing.T) { RunBenign(t, sb) })
	t.Run("Security", func(t *testing.T) { RunSecurity(t, sb) })
	if f.NoNetwork {
		t.Run("Egress", func(t *testing.T) {
			t.Run("NoNetworkByDefault", func(t *testing.T) { egressDefault(t, egress.Wrap(sb)) })
		})
		return
	}
	t.Run("Egress", func(t *testing.T) { RunEgress(t, sb) })
}

type withFeatures struct {
	sandbox.Sandbox
	f Features
}

// Unwrap returns the backend, for the egress layer's look for its
// optional interfaces (sandbox.Truster).
func (w withFeatures) Unwrap() sandbox.Sandbox { return w.Sandbox }

// featuresOf returns the features RunWith was given.
func featuresOf(sb sandbox.Sandbox) Features {
	if w, ok := sb.(withFeatures); ok {
		return w.f
	}
	return Features{}
}

// backendOf is the backend RunWith was given, for its optional interfaces.
func backendOf(sb sandbox.Sandbox) sandbox.Sandbox {
	if w, ok := sb.(withFeatures); ok {
		return w.Sandbox
	}
	return sb
}

// program is one execution of the suite.
type program struct {
	lang   string
	code   string
	limits sandbox.Limits
	ws     string // workspace; a fresh temporary directory when empty
	env    map[string]string
	stdin  string
	key    lang.TraceKey // when set, the program runs traced, the key on its stdin first (see lang.TraceKey)
	mark   string        // set in the environment, so that its processes can be found on the host
	net    *sandbox.Network
	binds  []sandbox.Bind
}

// execute runs p and fails the test on a setup error. It also checks the
// promise every attack relies on: the call returns within its wall-clock
// limit plus one second (the program does; see Features.CopyBack).
func execute(t *testing.T, sb sandbox.Sandbox, p program) sandbox.Result {
	t.Helper()
	res, err := tryExecute(t, sb, p)
	if err != nil {
		t.Fatalf("sandbox error: %v", err)
	}
	return res
}

// tryExecute is execute for a spec that a backend may refuse: it returns
// Run's error instead of failing the test.
func tryExecute(t *testing.T, sb sandbox.Sandbox, p program) (sandbox.Result, error) {
	t.Helper()
	l, err := lang.Lookup(p.lang)
	if err != nil {
		t.Fatal(err)
	}
	if p.ws == "" {
		p.ws = t.TempDir()
	}
	env := map[string]string{}
	for k, v := range l.Env {
		env[k] = v
	}
	for k, v := range p.env {
		env[k] = v
	}
	if p.mark != "" {
		env[markVar] = p.mark
	}
	path := "/code/main" + l.Ext
	spec := sandbox.Spec{
		Command:   l.Command(path),
		Workspace: p.ws,
		Files:     []sandbox.File{{Path: path, Data: []byte(p.code)}},
		Env:       env,
		Limits:    p.limits,
		Network:   p.net,
		Binds:     p.binds,
	}
	if p.key != "" {
		spec.Command, p.stdin = l.TracedCommand(path), string(p.key.Stdin())+p.stdin
	}
	if p.stdin != "" {
		spec.Stdin = strings.NewReader(p.stdin)
	}
	lim := p.limits.WithDefaults()
	ctx, cancel := context.WithTimeout(context.Background(), lim.WallTime+30*time.Second)
	defer cancel()
	start := time.Now()
	res, err := sb.Run(ctx, spec)
	elapsed := time.Since(start)
	if err != nil {
		return res, err
	}
	f := featuresOf(sb)
	switch {
	case !f.CopyBack && !f.KernelPerRun && elapsed > lim.WallTime+time.Second:
		t.Errorf("Run took %v, more than its limit %v plus 1s", elapsed, lim.WallTime)
	case res.WallTime > lim.WallTime+time.Second:
		t.Errorf("the program ran for %v, more than its limit %v plus 1s", res.WallTime, lim.WallTime)
	case elapsed > lim.WallTime+time.Second+copyBackAllowance:
		t.Errorf("Run took %v, more than its limit %v plus 1s and %v to copy back (or start a kernel)", elapsed, lim.WallTime, copyBackAllowance)
	case elapsed > lim.WallTime+time.Second:
		t.Logf("Run took %v, more than its limit %v plus 1s: the program %v, the copy back (or the kernel's start) the rest", elapsed, lim.WallTime, res.WallTime)
	}
	return res, nil
}

// marker returns a unique string to find a test's processes and files by.
func marker() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "cgmark" + hex.EncodeToString(b[:])
}

// markVar carries a test's marker into the environment of every process
// of its sandbox.
const markVar = "SANDBOXTEST_MARK"

// hostProcessesWith lists host processes whose environment has marker s.
func hostProcessesWith(s string) []string {
	entries, _ := os.ReadDir("/proc")
	var procs []string
	for _, e := range entries {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil || !strings.Contains(string(env), markVar+"="+s) {
			continue
		}
		if cmd, err := os.ReadFile("/proc/" + e.Name() + "/cmdline"); err == nil {
			procs = append(procs, e.Name()+": "+strings.ReplaceAll(string(cmd), "\x00", " "))
		}
	}
	return procs
}

// assertNoProcesses fails if any host process still carries mark, allowing
// the kernel a moment to finish reaping.
func assertNoProcesses(t *testing.T, mark string) {
	t.Helper()
	var left []string
	for i := 0; i < 50; i++ {
		if left = hostProcessesWith(mark); len(left) == 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Errorf("processes outlived the sandbox: %v", left)
}

func wantStatus(t *testing.T, res sandbox.Result, want sandbox.Status) {
	t.Helper()
	if res.Status != want {
		t.Fatalf("status = %s (exit %d, %s), want %s\nstdout: %.2000s\nstderr: %.2000s",
			res.Status, res.ExitCode, res.Message, want, res.Stdout, res.Stderr)
	}
}

func fileExists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}
