package kubernetes

import (
	"bufio"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/sandbox/internal/backendkit"
)

// TestProbe checks codeagent doctor's report on the cluster, and the
// discovery request its agent-sandbox line makes, on a group the cluster
// has.
func TestProbe(t *testing.T) {
	cfg := testConfig(t, 0)
	r := Probe(context.Background(), cfg)
	if !r.Usable() || r.Version == "" || r.Network == "" || !slices.Contains(r.RuntimeClasses, "codeagent (codeagent)") {
		t.Fatalf("report: %+v", r)
	}
	cfg.RuntimeClass = "codeagent-no-such-class"
	if r := Probe(context.Background(), cfg); !slices.Contains(r.Problems, "runtime class codeagent-no-such-class does not exist") {
		t.Errorf("a missing runtime class is not reported: %+v", r.Problems)
	}
	rc, _, err := Connect(cfg.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	api, err := newClient(rc)
	if err != nil {
		t.Fatal(err)
	}
	l, err := api.resourcesFor(context.Background(), "coordination.k8s.io/v1")
	if err != nil || !slices.ContainsFunc(l.APIResources, func(r metav1.APIResource) bool { return r.Kind == "Lease" }) {
		t.Errorf("resources of coordination.k8s.io/v1: %v %+v", err, l)
	}
	if _, err := api.resourcesFor(context.Background(), "agents.x-k8s.io/v0"); !apierrors.IsNotFound(err) {
		t.Errorf("a group version the cluster lacks: %v, want NotFound", err)
	}
}

// TestPodIsolationOnCluster checks, on the cluster, the spec of a Pod the
// backend created (as the API server stored it) and what a program sees
// from inside it.
func TestPodIsolationOnCluster(t *testing.T) {
	b := newTestBackend(t, testConfig(t, 1))
	defer closeAndCheck(t, b)
	waitIdle(t, b, 1, 3*time.Minute)
	pods := podsOf(t, b.api, b.cfg.Namespace, b.id)
	if len(pods) == 0 {
		t.Fatal("no Pod in the pool")
	}
	s, c := pods[0].Spec, pods[0].Spec.Containers[0]
	checks := map[string]bool{
		"non-root uid":             s.SecurityContext.RunAsUser != nil && *s.SecurityContext.RunAsUser == backendkit.DefaultHostUID,
		"seccomp":                  s.SecurityContext.SeccompProfile != nil,
		"no service account token": s.AutomountServiceAccountToken != nil && !*s.AutomountServiceAccountToken,
		"no service links":         s.EnableServiceLinks != nil && !*s.EnableServiceLinks,
		"deadline":                 s.ActiveDeadlineSeconds != nil && *s.ActiveDeadlineSeconds > 0,
		"owned by the Lease":       len(pods[0].OwnerReferences) == 1 && pods[0].OwnerReferences[0].UID == b.lease.UID,
		"read-only root":           *c.SecurityContext.ReadOnlyRootFilesystem,
		"capabilities dropped":     c.SecurityContext.Capabilities.Drop[0] == "ALL",
		"memory limit":             c.Resources.Limits.Memory().Value() == sandbox.DefaultLimits().Memory,
	}
	for what, ok := range checks {
		if !ok {
			t.Errorf("stored Pod: %s: not as expected", what)
		}
	}
	res, err := b.Run(context.Background(), sandbox.Spec{Workspace: t.TempDir(), Command: []string{"python3", "-c", `
import os
st = open('/proc/self/status').read()
print('caps0', 'CapEff:\t0000000000000000' in st)
print('nnp', 'NoNewPrivs:\t1' in st)
print('seccomp', 'Seccomp:\t2' in st)
print('token', os.path.exists('/var/run/secrets/kubernetes.io'))
try:
    open('/etc/codeagent-probe', 'w')
    print('rootfs writable')
except OSError:
    print('rootfs read-only')
print('ifaces', sorted(os.listdir('/sys/class/net')) if os.path.isdir('/sys/class/net') else [])
`}})
	if err != nil || res.Status != sandbox.StatusOK {
		t.Fatalf("run: %v %s %s", err, res.Status, res.Stderr)
	}
	for _, want := range []string{"caps0 True", "nnp True", "seccomp True", "token False", "rootfs read-only"} {
		if !strings.Contains(string(res.Stdout), want) {
			t.Errorf("inside the Pod: want %q in\n%s", want, res.Stdout)
		}
	}
}

// TestNetworkPolicy checks the namespace's deny-all policy for sandbox
// Pods, and that a program cannot reach the API server, whose address is
// the node's. (The local cluster's CNI gives Pods no network at all, so
// the policy is not what stops it there; on a cluster whose CNI enforces
// policies, it is.)
func TestNetworkPolicy(t *testing.T) {
	b := newTestBackend(t, testConfig(t, 0))
	defer closeAndCheck(t, b)
	np, err := b.api.networkPolicies(b.cfg.Namespace).Get(context.Background(), policyName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sp := np.Spec
	if sp.PodSelector.MatchLabels[labelSandbox] != "true" || len(sp.PolicyTypes) != 2 || len(sp.Ingress) != 0 || len(sp.Egress) != 0 {
		t.Fatalf("the policy does not deny all traffic of sandbox Pods: %+v", sp)
	}
	// A refused connection reached a host: a leak too.
	res, err := b.Run(context.Background(), sandbox.Spec{Workspace: t.TempDir(), Command: []string{"python3", "-c", `
import errno, socket, sys
for addr in [sys.argv[1] + ':36443', '10.96.0.1:443', '1.1.1.1:53']:
    h, p = addr.rsplit(':', 1)
    try:
        socket.create_connection((h, int(p)), timeout=2).close()
        print('LEAK', addr)
    except ConnectionRefusedError as e:
        print('LEAK', addr, e)
    except OSError as e:
        print('blocked', addr, e)
`, hostAddr(t)}, Limits: sandbox.Limits{WallTime: 20 * time.Second}})
	if err != nil || res.Status != sandbox.StatusOK {
		t.Fatalf("run: %v %s %s", err, res.Status, res.Stderr)
	}
	t.Logf("%s", res.Stdout)
	if strings.Contains(string(res.Stdout), "LEAK") || strings.Count(string(res.Stdout), "blocked") != 3 {
		t.Fatalf("network reachable from a sandbox Pod:\n%s", res.Stdout)
	}
}

// hostAddr is this machine's first non-loopback IPv4 address.
func hostAddr(t *testing.T) string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			return n.IP.String()
		}
	}
	return "192.0.2.1"
}

// helperEnv makes the test binary a codeagent that creates a pool and
// waits to be killed (TestKill9).
const helperEnv = "CODEAGENT_KUBE_TEST_OWNER"

// helperLifetime is the helper's Pod lifetime: its Pods' deadline.
const helperLifetime = 25 * time.Second

// TestOwnerHelper is the process TestKill9 kills; it does nothing in a
// normal test run.
func TestOwnerHelper(t *testing.T) {
	if os.Getenv(helperEnv) == "" {
		t.Skip("the helper process of TestKill9")
	}
	cfg := testConfig(t, 2)
	cfg.PodLifetime = helperLifetime
	b := newTestBackend(t, cfg)
	waitIdle(t, b, 2, 2*time.Minute)
	os.Stdout.WriteString("POOL " + b.id + "\n")
	time.Sleep(5 * time.Minute)
}

// TestKill9 kills -9 a process that owns a warm pool: its Pods end by
// their activeDeadlineSeconds without codeagent, and once its Lease has
// expired, a new backend's sweep removes its Pods and its Lease.
func TestKill9(t *testing.T) {
	kc := clusterOrSkip(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestOwnerHelper$", "-test.v")
	cmd.Env = append(os.Environ(), helperEnv+"=1", EnvKubeconfig+"="+kc)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	pool := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if id, ok := strings.CutPrefix(sc.Text(), "POOL "); ok {
				pool <- id
			}
		}
		close(pool)
	}()
	var id string
	select {
	case id = <-pool:
	case <-time.After(3 * time.Minute):
		t.Fatal("the helper did not start its pool")
	}
	if id == "" {
		t.Fatal("the helper ended before its pool was up")
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	b := newTestBackend(t, testConfig(t, 0)) // its sweep finds a live Lease yet
	defer closeAndCheck(t, b)
	pods := podsOf(t, b.api, b.cfg.Namespace, id)
	if len(pods) == 0 {
		t.Fatal("the helper's Pods are gone already")
	}
	// Every Pod ends by its deadline: the kubelet stops it.
	for _, p := range pods {
		if d := p.Spec.ActiveDeadlineSeconds; d == nil || time.Duration(*d)*time.Second > helperLifetime+time.Second {
			t.Errorf("Pod %s has no deadline within %v", p.Name, helperLifetime)
		}
	}
	deadline := killed.Add(helperLifetime + 30*time.Second)
	for {
		running := 0
		for _, p := range podsOf(t, b.api, b.cfg.Namespace, id) {
			if p.Status.Phase != corev1.PodFailed && p.Status.Phase != corev1.PodSucceeded {
				running++
			}
		}
		if running == 0 {
			t.Logf("all of the dead owner's Pods ended %v after the kill", time.Since(killed).Round(time.Second))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d Pods of the dead owner still run %v after the kill", running, time.Since(killed))
		}
		time.Sleep(time.Second)
	}
	// Once the Lease has expired, a sweep removes the Pods and the Lease.
	lease := "codeagent-" + id
	for {
		ctx, cancel := context.WithTimeout(context.Background(), apiTimeout)
		n, err := b.sweep(ctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			t.Logf("the sweep removed %d Pods %v after the kill", n, time.Since(killed).Round(time.Second))
			break
		}
		if time.Since(killed) > leaseDuration+time.Minute {
			t.Fatal("the sweep did not remove the dead owner's Pods")
		}
		time.Sleep(2 * time.Second)
	}
	if _, err := b.api.leases(b.cfg.Namespace).Get(context.Background(), lease, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the dead owner's Lease is still there: %v", err)
	}
	waitNoPods(t, b, id)
}

// TestAPIServerRestart restarts the local cluster's API server under a
// warm pool (the streams of its idle Pods end): runs fail cleanly while it
// is down, and succeed again once it is back. Needs scripts/kube-local.sh's
// cluster (CODEAGENT_KUBE_LOCAL=1).
func TestAPIServerRestart(t *testing.T) {
	clusterOrSkip(t)
	if os.Getenv("CODEAGENT_KUBE_LOCAL") == "" {
		t.Skip("CODEAGENT_KUBE_LOCAL is not set: restarting the API server needs the cluster of scripts/kube-local.sh")
	}
	b := newTestBackend(t, testConfig(t, 2))
	defer closeAndCheck(t, b)
	waitIdle(t, b, 2, 3*time.Minute)
	script, err := filepath.Abs("../../scripts/kube-local.sh")
	if err != nil {
		t.Fatal(err)
	}
	kube := func(args ...string) {
		t.Helper()
		c := exec.Command("bash", append([]string{script}, args...)...)
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("kube-local.sh %s: %v\n%s", args, err, out)
		}
	}
	kube("stop-apiserver")
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	res, err := b.Run(ctx, sandbox.Spec{Workspace: t.TempDir(), Command: []string{"true"}})
	cancel()
	t.Logf("a run with the API server down: %v (%s) in %v", err, res.Status, time.Since(start).Round(time.Millisecond))
	if err == nil && res.Status == sandbox.StatusOK {
		t.Error("a run succeeded with the API server down")
	}
	kube("start-apiserver")
	back := time.Now()
	for {
		ws := t.TempDir()
		res, err := b.Run(context.Background(), sandbox.Spec{Workspace: ws, Command: []string{"python3", "-c", "print('back')"}})
		if err == nil && res.Status == sandbox.StatusOK {
			t.Logf("runs work again %v after the API server's start", time.Since(back).Round(time.Millisecond))
			break
		}
		if time.Since(back) > 90*time.Second {
			t.Fatalf("runs still fail 90 s after the API server's start: %v %s", err, res.Message)
		}
		time.Sleep(time.Second)
	}
	hello(t, b)
}

// closeAndCheck closes b and checks that it left no Pod.
func closeAndCheck(t *testing.T, b *Backend) {
	t.Helper()
	if err := b.Close(); err != nil {
		t.Error(err)
	}
	assertNoPods(t, b)
}

// waitNoPods waits until no Pod of pool id is left.
func waitNoPods(t *testing.T, b *Backend, id string) {
	t.Helper()
	for i := 0; i < 120; i++ {
		if len(podsOf(t, b.api, b.cfg.Namespace, id)) == 0 {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Errorf("Pods of pool %s are left", id)
}
