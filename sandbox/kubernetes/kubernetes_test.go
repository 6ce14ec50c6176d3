package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/codeagent/codeagent/egress"
	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/sandbox/internal/backendkit"
	"github.com/codeagent/codeagent/sandbox/sandboxtest"
)

// EnvKubeconfig gates the tests that need a cluster: .ci/run sets it to
// the kubeconfig of scripts/kube-local.sh up.
const EnvKubeconfig = "CODEAGENT_KUBECONFIG"

// clusterOrSkip returns the test cluster's kubeconfig, or skips.
func clusterOrSkip(t testing.TB) string {
	t.Helper()
	kc := os.Getenv(EnvKubeconfig)
	if kc == "" {
		t.Skipf("%s is not set: start a cluster with scripts/kube-local.sh up and export %s=<the KUBECONFIG it prints> (.ci/run does)", EnvKubeconfig, EnvKubeconfig)
	}
	return kc
}

// testConfig is the backend on the test cluster as a user gets it: the
// runtime class and seccomp profile are the backend's defaults (or
// $CODEAGENT_KUBE_RUNTIME_CLASS and $CODEAGENT_KUBE_SECCOMP_PROFILE, as
// for a user), and the backend refuses to start programs where its
// isolation probe finds them weaker than this suite requires.
func testConfig(t testing.TB, warm int) Config {
	return Config{Kubeconfig: clusterOrSkip(t), Warm: warm, Logger: testLogger(t)}
}

func newTestBackend(t testing.TB, cfg Config) *Backend {
	t.Helper()
	b, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestConformance runs the shared suite with a warm pool of 2 (executions
// with other limits than the defaults take the cold path), then checks
// that Close leaves no Pod. Features, as this backend is: the workspace
// comes back as a copy after the program ended (CopyBack), and the disk
// limit is the agent's watch of the workspace, which kills the program
// once past it; the emptyDir's sizeLimit makes the kubelet evict the Pod
// later, it refuses no write (ReactiveDisk); Pods get no network and an
// allow list is refused (NoNetwork); every Pod runs as uid 2000000000
// (SharedHostUID).
func TestConformance(t *testing.T) {
	b := newTestBackend(t, testConfig(t, 2))
	sandboxtest.RunWith(t, b, sandboxtest.Features{CopyBack: true, ReactiveDisk: true, NoNetwork: true, SharedHostUID: true})
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	assertNoPods(t, b)
}

// TestNoLeftovers runs 200 pooled executions with a pool of 4, closes the
// backend and checks that no Pod of its pool remains.
func TestNoLeftovers(t *testing.T) {
	if testing.Short() {
		t.Skip("200 executions; skipped with -short")
	}
	b := newTestBackend(t, testConfig(t, 4))
	ws := t.TempDir()
	for i := 0; i < 200; i++ {
		res, err := b.Run(context.Background(), sandbox.Spec{Command: []string{"python3", "-c", "open('n.txt', 'w').write(str(1))"}, Workspace: ws})
		if err != nil || res.Status != sandbox.StatusOK {
			t.Fatalf("run %d: %v %s %s", i, err, res.Status, res.Stderr)
		}
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	assertNoPods(t, b)
}

// assertNoPods waits (the deletions are without grace, the kubelet still
// has to stop the containers) until no Pod of b's pool is left, and checks
// that its Lease is gone.
func assertNoPods(t *testing.T, b *Backend) {
	t.Helper()
	waitNoPods(t, b, b.id)
	if _, err := b.api.leases(b.cfg.Namespace).Get(context.Background(), b.lease.Name, metav1.GetOptions{}); err == nil {
		t.Errorf("Lease %s left", b.lease.Name)
	}
}

func podsOf(t testing.TB, api *client, ns, pool string) []corev1.Pod {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := api.pods(ns).List(ctx, metav1.ListOptions{LabelSelector: labelPool + "=" + pool})
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}

// hello runs a small program and fails the test unless it works.
func hello(t testing.TB, b *Backend) time.Duration {
	t.Helper()
	ws := t.TempDir()
	start := time.Now()
	res, err := b.Run(context.Background(), sandbox.Spec{Command: []string{"python3", "-c", "print('hi'); open('out.txt', 'w').write('x')"}, Workspace: ws})
	d := time.Since(start)
	if err != nil || res.Status != sandbox.StatusOK || string(res.Stdout) != "hi\n" {
		t.Fatalf("run: %v %s %q %s", err, res.Status, res.Stdout, res.Stderr)
	}
	if got, _ := os.ReadFile(ws + "/out.txt"); string(got) != "x" {
		t.Fatalf("workspace not copied back: %q", got)
	}
	return d
}

// waitIdle waits until b's pool holds n armed idle Pods of the default class.
func waitIdle(t testing.TB, b *Backend, n int, within time.Duration) {
	t.Helper()
	c := classOf(sandbox.DefaultLimits())
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if b.pool.wp.Idle(c, func(bx *box) bool { return !bx.dead() }) >= n {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("the pool did not hold %d armed Pods within %v", n, within)
}

// TestPodsDeletedBehindOurBack deletes the idle Pods of a pool, and then
// the Pod of a running execution, through the API: the pool replaces the
// idle ones, and the run ends promptly with a sandbox error.
func TestPodsDeletedBehindOurBack(t *testing.T) {
	b := newTestBackend(t, testConfig(t, 2))
	defer closeAndCheck(t, b)
	waitIdle(t, b, 2, 3*time.Minute)
	deleted := podsOf(t, b.api, b.cfg.Namespace, b.id)
	for _, p := range deleted {
		if err := b.deletePod(context.Background(), p.Name); err != nil {
			t.Fatal(err)
		}
	}
	// Until they are gone, the deleted Pods' streams may still be open: a
	// run in one fails before its program starts, and Run tries another.
	for gone := false; !gone; time.Sleep(200 * time.Millisecond) {
		gone = true
		for _, p := range podsOf(t, b.api, b.cfg.Namespace, b.id) {
			for _, d := range deleted {
				gone = gone && p.Name != d.Name
			}
		}
	}
	hello(t, b)
	waitIdle(t, b, 2, 3*time.Minute)

	ws := t.TempDir()
	done := make(chan error, 1)
	var res sandbox.Result
	go func() {
		var err error
		res, err = b.Run(context.Background(), sandbox.Spec{Command: []string{"sleep", "60"}, Workspace: ws,
			Limits: sandbox.Limits{WallTime: 90 * time.Second}})
		done <- err
	}()
	var victim string
	for i := 0; i < 100 && victim == ""; i++ {
		time.Sleep(100 * time.Millisecond)
		for _, p := range podsOf(t, b.api, b.cfg.Namespace, b.id) {
			if p.Spec.ActiveDeadlineSeconds != nil && *p.Spec.ActiveDeadlineSeconds < int64(b.cfg.PodLifetime.Seconds()) {
				victim = p.Name
			}
		}
	}
	if victim == "" {
		t.Fatal("the running execution's Pod was not found")
	}
	start := time.Now()
	if err := b.deletePod(context.Background(), victim); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		t.Logf("after the deletion of %s, Run returned in %v: %v (%s %s)", victim, time.Since(start), err, res.Status, res.Message)
		if err == nil && res.Status == sandbox.StatusOK {
			t.Fatalf("a run whose Pod was deleted succeeded")
		}
	case <-time.After(45 * time.Second):
		t.Fatal("Run did not return within 45 s of its Pod's deletion")
	}
	hello(t, b)
}

// TestSpecIsolation checks the Pod spec's isolation fields without a
// cluster.
func TestSpecIsolation(t *testing.T) {
	b := &Backend{cfg: withDefaults(Config{Namespace: "ns", SeccompProfile: "codeagent.json", RuntimeClass: "gvisor"}), id: "abc", owner: "o"}
	lim := sandbox.Limits{Memory: 64 << 20, CPUs: 0.5, Disk: 10 << 20, Processes: 32}
	p := b.podSpec(classOf(lim), 10*time.Minute)
	s, c := p.Spec, p.Spec.Containers[0]
	checks := map[string]bool{
		"non-root uid":             *s.SecurityContext.RunAsUser == backendkit.DefaultHostUID && *s.SecurityContext.RunAsNonRoot,
		"seccomp Localhost":        s.SecurityContext.SeccompProfile.Type == corev1.SeccompProfileTypeLocalhost,
		"no service account token": !*s.AutomountServiceAccountToken,
		"no service links":         !*s.EnableServiceLinks,
		"no host namespaces":       !s.HostNetwork && !s.HostPID && !s.HostIPC,
		"deadline":                 *s.ActiveDeadlineSeconds == 600 && c.Command[1] == "600",
		"runtime class":            *s.RuntimeClassName == "gvisor",
		"read-only root":           *c.SecurityContext.ReadOnlyRootFilesystem,
		"no privilege escalation":  !*c.SecurityContext.AllowPrivilegeEscalation && !*c.SecurityContext.Privileged,
		"capabilities dropped":     len(c.SecurityContext.Capabilities.Drop) == 1 && c.SecurityContext.Capabilities.Drop[0] == "ALL",
		"memory limit":             c.Resources.Limits.Memory().Value() == 64<<20,
		"cpu limit":                c.Resources.Limits.Cpu().MilliValue() == 500,
		"ephemeral storage":        c.Resources.Limits.StorageEphemeral().Value() == 10<<20+workspaceRoom,
		"tmp in memory, sized":     s.Volumes[1].EmptyDir.Medium == corev1.StorageMediumMemory && s.Volumes[1].EmptyDir.SizeLimit.Value() == 10<<20,
		"workspace sized":          s.Volumes[0].EmptyDir.SizeLimit.Value() == 10<<20+workspaceRoom,
		"pids annotation":          p.Annotations[annoPids] == "32",
		"labels":                   p.Labels[labelSandbox] == "true" && p.Labels[labelPool] == "abc",
	}
	for what, ok := range checks {
		if !ok {
			t.Errorf("%s: not set as expected", what)
		}
	}
}

func ExampleConfig() {
	fmt.Println(withDefaults(Config{}).Image)
	// Output: codeagent-sandbox:latest
}

// TestRefusesAllowList: a Pod gets no network, so a spec asking for one is
// refused before any Pod is used, through egress.Wrap as backends.Open's
// callers build it, not run with proxy settings that lead nowhere.
func TestRefusesAllowList(t *testing.T) {
	sb := egress.Wrap(&Backend{}) // refused before anything of the backend is used
	spec := sandbox.Spec{Command: []string{"python3", CodePath + "/main.py"}, Workspace: t.TempDir(),
		Files:   []sandbox.File{{Path: CodePath + "/main.py", Data: []byte("print(1)")}},
		Network: &sandbox.Network{Allow: []string{"api.example.com"}}}
	if _, err := sb.Run(context.Background(), spec); !errors.Is(err, sandbox.ErrInvalidSpec) {
		t.Fatalf("an allow list: %v, want ErrInvalidSpec", err)
	}
	spec.Network = nil
	if err := validate(spec); err != nil {
		t.Fatalf("no network: %v", err)
	}
}

// TestBindsReachThePod binds an environment as an installer leaves it
// (nested packages, a read-only directory, a link planted by a package's
// build that points at a host file) and a wheelhouse: the program reads
// and imports them, the link stays a link inside the Pod (it never copies
// the host file it names), nothing it does changes them, and the Pod made
// for the spec is gone after the run; a later spec sees no bind.
func TestBindsReachThePod(t *testing.T) {
	b := newTestBackend(t, testConfig(t, 1))
	defer closeAndCheck(t, b)
	env := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(env+"/pkg/sub", 0o755))
	must(os.WriteFile(env+"/pkg/__init__.py", []byte("from .sub.mod import VALUE\n"), 0o644))
	must(os.WriteFile(env+"/pkg/sub/__init__.py", nil, 0o644))
	must(os.WriteFile(env+"/pkg/sub/mod.py", []byte("VALUE = 42\n"), 0o644))
	must(os.WriteFile(env+"/big.bin", make([]byte, 3<<20), 0o644))
	must(os.Symlink("/etc/shadow", env+"/planted"))
	must(os.Mkdir(env+"/ro", 0o755))
	must(os.WriteFile(env+"/ro/f", []byte("f"), 0o644))
	must(os.Chmod(env+"/ro", 0o555))
	defer os.Chmod(env+"/ro", 0o755)
	wheels := t.TempDir()
	must(os.WriteFile(wheels+"/w.txt", []byte("wheel"), 0o644))
	code := `import os, pkg
print(pkg.VALUE, os.path.getsize('/deps/python/big.bin'), os.readlink('/deps/python/planted'), open('/deps/python/ro/f').read(), open('/deps/wheels/w.txt').read())
for what in (lambda: open('/deps/python/x', 'w'), lambda: os.remove('/deps/python/big.bin'), lambda: os.chmod('/deps/python/ro', 0o777), lambda: open('/deps/wheels/w.txt', 'a')):
    try:
        what()
        print('changed')
    except OSError as e:
        print(e.errno == 30)
`
	spec := sandbox.Spec{Command: []string{"python3", CodePath + "/main.py"}, Workspace: t.TempDir(),
		Files: []sandbox.File{{Path: CodePath + "/main.py", Data: []byte(code)}},
		Env:   map[string]string{"PYTHONPATH": sandbox.BindRoot + "/python"},
		Binds: []sandbox.Bind{{Source: env, Path: sandbox.BindRoot + "/python"}, {Source: wheels, Path: sandbox.BindRoot + "/wheels"}}}
	res, err := b.Run(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("42 %d /etc/shadow f wheel\nTrue\nTrue\nTrue\nTrue\n", 3<<20)
	if res.Status != sandbox.StatusOK || string(res.Stdout) != want {
		t.Fatalf("status %s, stdout %q, want %q; stderr %s", res.Status, res.Stdout, want, res.Stderr)
	}
	if b, err := os.ReadFile(env + "/ro/f"); err != nil || string(b) != "f" {
		t.Errorf("the host's bound file changed: %q %v", b, err)
	}
	res, err = b.Run(context.Background(), sandbox.Spec{Command: []string{"python3", "-c", "import os; print(os.path.exists('/deps/python'))"}, Workspace: t.TempDir()})
	if err != nil || string(res.Stdout) != "False\n" {
		t.Fatalf("a spec without binds: %v %q %s", err, res.Stdout, res.Stderr)
	}
}
