package kubernetes

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/codeagent/codeagent/sandbox"
)

// userConfig is the backend as a user starts it: no runtime class, no
// seccomp profile, no test-only setting.
func userConfig(t *testing.T, warm int) Config {
	return Config{Kubeconfig: clusterOrSkip(t), Warm: warm, Logger: testLogger(t)}
}

func pyRun(t *testing.T, b *Backend, code string, lim sandbox.Limits) (sandbox.Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	return b.Run(ctx, sandbox.Spec{Command: []string{"python3", "-c", code}, Workspace: t.TempDir(), Limits: lim})
}

// TestDefaultsChosen: with no flags, on a cluster that has codeagent's
// runtime class and profile, the backend uses both, every check of its
// probe passes, and the probe ran once for the default limits however many
// programs run, once more for another process limit.
func TestDefaultsChosen(t *testing.T) {
	b := newTestBackend(t, userConfig(t, 1))
	defer closeAndCheck(t, b)
	iso, err := b.Isolation(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if iso.RuntimeClass != DefaultRuntimeClass || iso.SeccompProfile != DefaultSeccompProfile || len(iso.Failed()) > 0 || len(iso.Checks) < 9 {
		t.Fatalf("isolation with the defaults: %+v", iso)
	}
	for i := 0; i < 3; i++ {
		if res, err := pyRun(t, b, "print(1)", sandbox.Limits{}); err != nil || res.Status != sandbox.StatusOK || len(res.WeakIsolation) > 0 {
			t.Fatalf("run %d: %v %+v", i, err, res)
		}
	}
	if n := b.probes.Load(); n != 1 {
		t.Fatalf("%d probes for one template, want 1", n)
	}
	for i := 0; i < 2; i++ {
		if res, err := pyRun(t, b, "print(1)", sandbox.Limits{Processes: 40}); err != nil || res.Status != sandbox.StatusOK {
			t.Fatalf("run with 40 processes: %v %+v", err, res)
		}
	}
	if n := b.probes.Load(); n != 2 {
		t.Fatalf("%d probes for two templates, want 2", n)
	}
	pods := podsOf(t, b.api, b.cfg.Namespace, b.id)
	for _, p := range pods {
		sc := p.Spec.SecurityContext.SeccompProfile
		if sc == nil || sc.Type != corev1.SeccompProfileTypeLocalhost || *sc.LocalhostProfile != DefaultSeccompProfile ||
			p.Spec.RuntimeClassName == nil || *p.Spec.RuntimeClassName != DefaultRuntimeClass {
			t.Errorf("Pod %s: seccomp %+v, runtime class %v", p.Name, sc, p.Spec.RuntimeClassName)
		}
	}
}

// wantRefused checks that a run is refused, before any program ran, with
// an *IsolationError that names each of want.
func wantRefused(t *testing.T, b *Backend, want ...string) {
	t.Helper()
	res, err := pyRun(t, b, "open('ran', 'w').write('x')", sandbox.Limits{})
	var se *sandbox.SetupError
	var ie *IsolationError
	if !errors.As(err, &se) || !errors.As(err, &ie) || res.Status != sandbox.StatusSandboxError {
		t.Fatalf("run on a weak cluster: %v %+v", err, res)
	}
	for _, w := range append(want, "--allow-weak-isolation", "docs/KUBERNETES.md") {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("the refusal does not name %q: %v", w, err)
		}
	}
}

// TestRefusesWeakPods: the node's default runtime with RuntimeDefault
// (what a user got before) lets io_uring, ptrace of PID 1 and any number
// of processes through: every program is refused, no Pod is kept warm,
// and with --allow-weak-isolation programs run and each result says what
// is weaker.
func TestRefusesWeakPods(t *testing.T) {
	cfg := userConfig(t, 2)
	cfg.RuntimeClass, cfg.SeccompProfile = RuntimeClassDefault, SeccompRuntimeDefault
	b := newTestBackend(t, cfg)
	wantRefused(t, b, "io_uring_setup", "ptrace", "processes")
	if n := len(podsOf(t, b.api, b.cfg.Namespace, b.id)); n > 1 {
		t.Errorf("%d Pods of a refusing backend, want at most its probe's (being deleted)", n)
	}
	closeAndCheck(t, b)

	cfg.AllowWeakIsolation = true
	b = newTestBackend(t, cfg)
	defer closeAndCheck(t, b)
	res, err := pyRun(t, b, "print('ran')", sandbox.Limits{})
	if err != nil || res.Status != sandbox.StatusOK || len(res.WeakIsolation) < 3 {
		t.Fatalf("with --allow-weak-isolation: %v %+v", err, res)
	}
	if j := res.JSON(); len(j.WeakIsolation) != len(res.WeakIsolation) {
		t.Errorf("the JSON result does not carry the weaknesses: %+v", j)
	}
}

// TestNoProfileOnCluster: where the node lacks codeagent's profile (a name
// no node has stands for it), the default falls back to RuntimeDefault,
// the probe finds it weak and programs are refused; a profile the user
// named and the node lacks fails New at once, not after the start timeout.
func TestNoProfileOnCluster(t *testing.T) {
	defer func(p string) { autoSeccompProfile = p }(autoSeccompProfile)
	autoSeccompProfile = "codeagent-absent.json"
	cfg := userConfig(t, 0)
	cfg.RuntimeClass = RuntimeClassDefault
	b := newTestBackend(t, cfg)
	iso, err := b.Isolation(context.Background())
	if err != nil || iso.SeccompProfile != SeccompRuntimeDefault || !strings.Contains(iso.Note, "codeagent-absent.json is not installed") {
		t.Fatalf("fallback: %v %+v", err, iso)
	}
	wantRefused(t, b, "io_uring_setup", "ptrace")
	closeAndCheck(t, b)

	cfg.SeccompProfile = "codeagent-absent.json"
	start := time.Now()
	_, err = New(cfg)
	if !errors.Is(err, errSeccompProfile) || !strings.Contains(err.Error(), "codeagent-absent.json") || time.Since(start) > time.Minute {
		t.Fatalf("a named profile the node lacks: %v after %v", err, time.Since(start))
	}
}

// TestPermanentStartErrors: a Pod waiting on a seccomp profile the node
// lacks is a permanent error; an image being pulled is not.
func TestPermanentStartErrors(t *testing.T) {
	pod := func(reason, msg string) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}}}}}
	}
	if err := permanent(pod("CreateContainerError", `failed to create containerd container: cannot load seccomp profile "/x/y.json": no such file`)); !errors.Is(err, errSeccompProfile) {
		t.Errorf("missing profile: %v", err)
	}
	if err := permanent(pod("ContainerCreating", "")); err != nil {
		t.Errorf("creating: %v", err)
	}
	if err := permanent(pod("ErrImagePull", "pull access denied")); err != nil {
		t.Errorf("image pull: %v", err)
	}
}

// TestIsolationErrorMessage: the refusal names each failed check, the
// template and the ways out.
func TestIsolationErrorMessage(t *testing.T) {
	iso := Isolation{SeccompProfile: SeccompRuntimeDefault, Checks: []Check{
		{Name: "io_uring_setup", OK: false, Detail: "io_uring_setup(8) succeeded"},
		{Name: "unshare", OK: true, Detail: "refused"},
		{Name: "processes", OK: false, Detail: "no process limit: 80 threads started (limit 64)"},
	}}
	msg := (&IsolationError{Isolation: iso}).Error()
	for _, w := range []string{"io_uring_setup(8) succeeded", "no process limit", "the node's default", "RuntimeDefault", "--allow-weak-isolation", "docs/KUBERNETES.md"} {
		if !strings.Contains(msg, w) {
			t.Errorf("message lacks %q: %s", w, msg)
		}
	}
	if strings.Contains(msg, "unshare") {
		t.Errorf("a passed check is named: %s", msg)
	}
}
