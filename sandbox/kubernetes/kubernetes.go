// Package kubernetes is codeagent's sandbox backend for a Kubernetes
// cluster: one Pod per execution, used once, with no network (a deny-all
// NetworkPolicy, for a CNI that enforces it), a read-only root, no
// capabilities or privilege escalation, a uid no account uses, seccomp
// (RuntimeDefault or codeagent's Localhost profile), no service account
// token, resource limits from sandbox.Limits, size-limited emptyDirs for
// the workspace and /tmp, and an activeDeadlineSeconds on every Pod.
//
// Before any program runs in Pods of a template, a probe program tries
// in one what the conformance suite relies on being refused (isolation.go);
// the backend refuses to run programs where one succeeds, unless
// Config.AllowWeakIsolation accepts it and every result says so. By
// default it chooses codeagent's runtime class and seccomp profile where
// the cluster offers them.
//
// A warm pool keeps Pods running ahead per limits class, each with two exec
// streams already open: the program's, waiting for its argv, and the Pod's
// agent (agent.py), which stages the workspace, watches the program and
// the workspace's size, and sends back what changed, applied with the
// Docker backend's rules (no links followed, owners and modes by package
// wsperm, nothing on another file system, at most the disk limit of
// growth). Pods are labelled and owned by a Lease that
// the backend renews; a later backend's sweep removes what a dead one
// left. docs/KUBERNETES.md explains the design.
package kubernetes

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/codeagent/codeagent/procid"
	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/sandbox/internal/backendkit"
)

// DefaultImage is the project's sandbox image (images/build-offline.sh).
const DefaultImage = "codeagent-sandbox:latest"

// CodePath is the only directory where Spec.Files may be placed.
const CodePath = "/code"

// Defaults of Config.RuntimeClass and Config.SeccompProfile: codeagent's
// runtime class where the cluster has it (scripts/kube-local.sh installs
// it) and its Localhost profile, which the probe finds missing or not.
const (
	DefaultRuntimeClass   = "codeagent"
	DefaultSeccompProfile = "codeagent.json"
	// SeccompRuntimeDefault names the runtime's own profile.
	SeccompRuntimeDefault = "RuntimeDefault"
	// RuntimeClassDefault names the node's default runtime.
	RuntimeClassDefault = "default"
)

// autoSeccompProfile is DefaultSeccompProfile; a test names a profile no
// node has, to see the backend on a cluster without codeagent's.
var autoSeccompProfile = DefaultSeccompProfile

// Environment variables that set Config's fields left empty.
const (
	EnvNamespace    = "CODEAGENT_KUBE_NAMESPACE"
	EnvRuntimeClass = "CODEAGENT_KUBE_RUNTIME_CLASS"
	EnvSeccomp      = "CODEAGENT_KUBE_SECCOMP_PROFILE"
	EnvImage        = "CODEAGENT_KUBE_IMAGE"
)

// Config configures the backend.
type Config struct {
	// Kubeconfig is the kubeconfig file; empty means $KUBECONFIG, the
	// in-cluster configuration inside a Pod, or ~/.kube/config.
	Kubeconfig string
	// Namespace holds the sandbox Pods; empty means $CODEAGENT_KUBE_NAMESPACE,
	// the kubeconfig's namespace, or the Pod's own in a cluster.
	Namespace string
	// Image runs the programs: DefaultImage (or $CODEAGENT_KUBE_IMAGE). It
	// needs bash, env, prlimit and python3 (for the agent).
	Image string
	// RuntimeClass is the Pods' runtimeClassName (gVisor, Kata, ...); empty
	// means $CODEAGENT_KUBE_RUNTIME_CLASS, else DefaultRuntimeClass when the
	// cluster has it, else the node's default runtime (RuntimeClassDefault
	// names that one).
	RuntimeClass string
	// SeccompProfile is a Localhost profile, relative to the kubelet's
	// seccomp directory, or SeccompRuntimeDefault; empty means
	// $CODEAGENT_KUBE_SECCOMP_PROFILE, else DefaultSeccompProfile when the
	// node has it (scripts/kube-local.sh installs it), else RuntimeDefault.
	SeccompProfile string
	// AllowWeakIsolation runs programs in Pods where the isolation probe
	// found something the conformance suite relies on not refused; each
	// result names what (sandbox.Result.WeakIsolation).
	AllowWeakIsolation bool
	// Warm is how many idle Pods to keep armed per limits class.
	Warm int
	// HostUID is the uid and gid programs run as: 2,000,000,000 (backendkit.DefaultHostUID) when 0.
	HostUID int
	// IdleTimeout drops the warm Pods of a class unused for that long (10 min).
	IdleTimeout time.Duration
	// CheckInterval is how often idle Pods are checked (2 s).
	CheckInterval time.Duration
	// StartTimeout bounds a Pod's start (3 min: an image may be pulled).
	StartTimeout time.Duration
	// PodLifetime is an idle Pod's activeDeadlineSeconds (15 min); taken
	// for a run it is lowered to the run's wall-clock limit plus a grace.
	PodLifetime time.Duration
	// Transport of the exec streams: "websocket", "spdy", or "" for
	// WebSocket with a fallback to SPDY.
	Transport string
	Logger    *slog.Logger
}

// Backend runs programs in Pods.
type Backend struct {
	cfg   Config
	log   *slog.Logger
	rest  *rest.Config
	api   *client
	id    string
	owner string
	lease *coordv1.Lease
	pool  *pool
	watch *podWatch

	// The isolation probe's results per template (isolation.go).
	isoMu sync.Mutex
	iso   map[isoKey]*isoState
	// tmplMu guards cfg.SeccompProfile, which the probe may change from
	// the default to RuntimeDefault, and tmplNote, how both were chosen.
	tmplMu      sync.Mutex
	tmplNote    string
	autoSeccomp atomic.Bool
	probes      atomic.Int64 // probe Pods started, for tests
	trust       *backendkit.ImageTrust
}

var _ sandbox.Sandbox = (*Backend)(nil)

// apiTimeout bounds each API call outside of a program's run.
const apiTimeout = 30 * time.Second

// New connects to the cluster, creates the backend's Lease and the
// namespace's shared objects, sweeps what dead backends left, chooses the
// runtime class and seccomp profile left empty, runs the isolation probe
// in one Pod and, when it passed (or AllowWeakIsolation), starts the warm
// pool. Where the probe found weaker isolation, New succeeds and every Run
// is refused with an *IsolationError inside a *sandbox.SetupError. Other
// errors are *sandbox.SetupError.
func New(cfg Config) (*Backend, error) {
	cfg = withDefaults(cfg)
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	quietKlog(log)
	rc, ns, err := Connect(cfg.Kubeconfig)
	if err != nil {
		return nil, &sandbox.SetupError{Reason: "kubernetes client configuration (set KUBECONFIG, or start scripts/kube-local.sh up)", Err: err}
	}
	if cfg.Namespace == "" {
		cfg.Namespace = ns
	}
	api, err := newClient(rc)
	if err != nil {
		return nil, &sandbox.SetupError{Reason: "kubernetes client", Err: err}
	}
	var r [4]byte
	_, _ = rand.Read(r[:])
	b := &Backend{cfg: cfg, log: log, rest: rc, api: api, id: hex.EncodeToString(r[:]), owner: procid.Self().String(),
		iso: map[isoKey]*isoState{}, trust: &backendkit.ImageTrust{Image: cfg.Image}}
	ctx, cancel := context.WithTimeout(context.Background(), apiTimeout)
	defer cancel()
	if _, err := api.serverVersion(ctx); err != nil {
		return nil, &sandbox.SetupError{Reason: "no Kubernetes API server reachable at " + rc.Host, Err: err}
	}
	if err := b.takeLease(ctx); err != nil {
		return nil, &sandbox.SetupError{Reason: "namespace " + cfg.Namespace, Err: err}
	}
	if err := b.ensureShared(ctx); err != nil {
		b.dropLease()
		return nil, &sandbox.SetupError{Reason: "namespace " + cfg.Namespace, Err: err}
	}
	if n, err := b.sweep(ctx); err != nil {
		log.Warn("kubernetes: removing leftovers of earlier runs", "err", err)
	} else if n > 0 {
		log.Info("kubernetes: removed leftovers of earlier runs", "pods", n)
	}
	b.chooseTemplate(ctx)
	b.watch = newPodWatch(b)
	b.pool = newPool(b)
	iso, err := b.isolation(context.Background(), sandbox.DefaultLimits())
	if err != nil {
		_ = b.Close()
		return nil, &sandbox.SetupError{Reason: "check the isolation of sandbox Pods", Err: err}
	}
	switch failed := iso.Failed(); {
	case len(failed) > 0 && !cfg.AllowWeakIsolation:
		// Every Run says why (gate); no Pod is kept warm for nothing.
		return b, nil
	case len(failed) > 0:
		log.Warn("kubernetes: running programs with weaker isolation (--allow-weak-isolation)", "weak", strings.Join(failed, "; "))
	}
	if cfg.Warm > 0 {
		b.pool.prime(classOf(sandbox.DefaultLimits()))
	}
	return b, nil
}

// chooseTemplate resolves the runtime class and seccomp profile that
// Config left to the backend.
func (b *Backend) chooseTemplate(ctx context.Context) {
	var notes []string
	switch b.cfg.RuntimeClass {
	case RuntimeClassDefault:
		b.cfg.RuntimeClass = ""
	case "":
		if _, err := b.api.runtimeClasses().Get(ctx, DefaultRuntimeClass, metav1.GetOptions{}); err == nil {
			b.cfg.RuntimeClass = DefaultRuntimeClass
			notes = append(notes, "runtime class "+DefaultRuntimeClass+" found in the cluster")
		} else {
			notes = append(notes, "no runtime class "+DefaultRuntimeClass+" in the cluster: the node's default runtime")
		}
	}
	if b.cfg.SeccompProfile == "" {
		b.cfg.SeccompProfile = autoSeccompProfile
		b.autoSeccomp.Store(true)
		notes = append(notes, "seccomp profile "+autoSeccompProfile+" by default")
	}
	b.tmplNote = strings.Join(notes, "; ")
}

func withDefaults(cfg Config) Config {
	env := func(v *string, k, def string) {
		if *v == "" {
			*v = os.Getenv(k)
		}
		if *v == "" {
			*v = def
		}
	}
	env(&cfg.Namespace, EnvNamespace, "")
	env(&cfg.Image, EnvImage, DefaultImage)
	env(&cfg.RuntimeClass, EnvRuntimeClass, "")
	env(&cfg.SeccompProfile, EnvSeccomp, "")
	if strings.EqualFold(cfg.SeccompProfile, SeccompRuntimeDefault) {
		cfg.SeccompProfile = SeccompRuntimeDefault
	}
	dur := func(d *time.Duration, def time.Duration) {
		if *d <= 0 {
			*d = def
		}
	}
	dur(&cfg.IdleTimeout, 10*time.Minute)
	dur(&cfg.CheckInterval, 2*time.Second)
	dur(&cfg.StartTimeout, 3*time.Minute)
	dur(&cfg.PodLifetime, 15*time.Minute)
	if cfg.HostUID == 0 {
		cfg.HostUID = backendkit.DefaultHostUID
	}
	return cfg
}

// Connect returns the client configuration of kubeconfig (see
// Config.Kubeconfig) and its namespace.
func Connect(kubeconfig string) (*rest.Config, string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if kubeconfig != "" {
		rules.ExplicitPath = kubeconfig
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{})
	rc, err := cc.ClientConfig()
	if err != nil {
		return nil, "", err
	}
	ns, _, err := cc.Namespace()
	if err != nil || ns == "" {
		ns = "default"
	}
	rc.QPS, rc.Burst = 100, 200
	return rc, ns, nil
}

// Close deletes every Pod of the backend and its Lease. Run must not be
// called after it.
func (b *Backend) Close() error {
	err := b.pool.close()
	b.watch.close()
	b.dropLease()
	return err
}

func (b *Backend) dropLease() {
	if b.lease == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), apiTimeout)
	defer cancel()
	if err := b.api.leases(b.cfg.Namespace).Delete(ctx, b.lease.Name, metaDelete()); err != nil {
		b.log.Warn("kubernetes: delete the Lease", "err", err)
	}
}

// destroy ends a box's streams and deletes its Pod.
func (b *Backend) destroy(bx *box) {
	if bx.cancel != nil {
		bx.cancel()
	}
	b.watch.remove(bx)
	ctx, cancel := context.WithTimeout(context.Background(), apiTimeout)
	defer cancel()
	if err := b.deletePod(ctx, bx.name); err != nil {
		b.log.Warn("kubernetes: delete Pod", "pod", bx.name, "err", err)
	}
}

// Run implements sandbox.Sandbox.
func (b *Backend) Run(ctx context.Context, spec sandbox.Spec) (sandbox.Result, error) {
	return backendkit.RunChecked(ctx, spec, "kubernetes", validate, func(ctx context.Context, spec sandbox.Spec, lim sandbox.Limits) (sandbox.Result, error) {
		weak, err := b.gate(ctx, lim)
		if err != nil {
			return sandbox.Result{}, err
		}
		res, err := b.execute(ctx, spec, lim)
		res.WeakIsolation = weak
		return res, err
	})
}

func validate(spec sandbox.Spec) error {
	if err := spec.Validate(); err != nil {
		return err
	}
	if spec.Network != nil || spec.Gateway != nil {
		// Pods get no network (a deny-all policy); the egress proxy cannot
		// be handed into one, so an allow list is refused, not ignored.
		return fmt.Errorf("%w: the kubernetes backend gives programs no network; an allow list needs the namespace or docker backend", sandbox.ErrInvalidSpec)
	}
	for _, f := range spec.Files {
		if !strings.HasPrefix(f.Path, CodePath+"/") || !validRel(strings.TrimPrefix(f.Path, CodePath+"/")) {
			return fmt.Errorf("%w: file path %q: the kubernetes backend places files under %s/ only", sandbox.ErrInvalidSpec, f.Path, CodePath)
		}
	}
	return nil
}

// TrustStore implements sandbox.Truster: the image's bundle, read in a
// Pod once.
func (b *Backend) TrustStore(ctx context.Context) (sandbox.TrustStore, error) {
	return b.trust.Get(ctx, b.Run)
}

// Namespace is where the backend's Pods run.
func (b *Backend) Namespace() string { return b.cfg.Namespace }

// PoolID is the label value codeagent.io/pool of the backend's Pods.
func (b *Backend) PoolID() string { return b.id }
