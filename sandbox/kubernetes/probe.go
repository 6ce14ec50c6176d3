package kubernetes

import (
	"context"
	"fmt"
	"sort"
	"strings"

	authv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Report is what a cluster offers the backend, for codeagent doctor.
type Report struct {
	Server    string // API server address
	Version   string // its version
	Namespace string
	// Reached is set when the API server answered; the fields below are
	// only known then.
	Reached bool
	// RuntimeClasses are name (handler) pairs; RuntimeClassErr when they
	// could not be listed.
	RuntimeClasses  []string
	RuntimeClassErr string
	// Network says what enforces the sandbox Pods' lack of network.
	Network string
	// Missing are the permissions of the Role in docs/KUBERNETES.md that
	// the current user lacks, as "verb resource".
	Missing []string
	// AgentSandbox lists the agent-sandbox resources the cluster serves.
	AgentSandbox []string
	Problems     []string
}

// Usable reports whether the backend can run here.
func (r Report) Usable() bool { return len(r.Problems) == 0 && len(r.Missing) == 0 }

// Needed are the permissions the backend uses in its namespace: the Role of
// docs/KUBERNETES.md.
var Needed = []struct {
	Group, Resource, Sub string
	Verbs                []string
}{
	{"", "pods", "", []string{"create", "delete", "get", "list", "watch", "patch"}},
	{"", "pods", "exec", []string{"create", "get"}},
	{"", "configmaps", "", []string{"get", "create"}},
	{"coordination.k8s.io", "leases", "", []string{"create", "delete", "get", "list", "patch"}},
	{"networking.k8s.io", "networkpolicies", "", []string{"get", "create"}},
}

// agentSandboxGroups are the API groups of kubernetes-sigs/agent-sandbox.
var agentSandboxGroups = []string{"agents.x-k8s.io", "extensions.agents.x-k8s.io"}

// Probe asks the cluster of cfg what it offers; it does not create
// anything.
func Probe(ctx context.Context, cfg Config) Report {
	cfg = withDefaults(cfg)
	var r Report
	rc, ns, err := Connect(cfg.Kubeconfig)
	if err != nil {
		r.Problems = append(r.Problems, "no cluster configuration: "+err.Error())
		return r
	}
	if cfg.Namespace == "" {
		cfg.Namespace = ns
	}
	r.Server, r.Namespace = rc.Host, cfg.Namespace
	api, err := newClient(rc)
	if err != nil {
		r.Problems = append(r.Problems, err.Error())
		return r
	}
	v, err := api.serverVersion(ctx)
	if err != nil {
		r.Problems = append(r.Problems, "API server unreachable: "+err.Error())
		return r
	}
	r.Version, r.Reached = v.GitVersion, true
	if l, err := api.runtimeClasses().List(ctx, metav1.ListOptions{}); err != nil {
		r.RuntimeClassErr = err.Error()
	} else {
		for _, c := range l.Items {
			r.RuntimeClasses = append(r.RuntimeClasses, c.Name+" ("+c.Handler+")")
		}
	}
	if cfg.RuntimeClass != "" && cfg.RuntimeClass != RuntimeClassDefault {
		if _, err := api.runtimeClasses().Get(ctx, cfg.RuntimeClass, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			r.Problems = append(r.Problems, "runtime class "+cfg.RuntimeClass+" does not exist")
		}
	}
	for _, n := range Needed {
		for _, verb := range n.Verbs {
			rev := &authv1.SelfSubjectAccessReview{Spec: authv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authv1.ResourceAttributes{
				Namespace: cfg.Namespace, Verb: verb, Group: n.Group, Resource: n.Resource, Subresource: n.Sub}}}
			got, err := api.accessReview(ctx, rev)
			if err != nil || !got.Status.Allowed {
				what := n.Resource
				if n.Sub != "" {
					what += "/" + n.Sub
				}
				r.Missing = append(r.Missing, verb+" "+what)
			}
		}
	}
	r.Network = network(ctx, api)
	for _, g := range agentSandboxGroups {
		if l, err := api.resourcesFor(ctx, g+"/v1alpha1"); err == nil {
			for _, res := range l.APIResources {
				if !strings.Contains(res.Name, "/") {
					r.AgentSandbox = append(r.AgentSandbox, res.Kind)
				}
			}
		}
	}
	sort.Strings(r.AgentSandbox)
	return r
}

// network says how the sandbox Pods' isolation from the network is
// enforced: the deny-all NetworkPolicy needs a CNI plugin that enforces
// policies, which the API does not tell; known ones are recognized by
// their Pods in kube-system, and a node labelled codeagent.io/network=none
// (scripts/kube-local.sh) gives Pods no network at all.
func network(ctx context.Context, api *client) string {
	if nodes, err := api.nodes().List(ctx, metav1.ListOptions{LabelSelector: "codeagent.io/network=none"}); err == nil && len(nodes.Items) > 0 {
		return fmt.Sprintf("Pods get no network on %d node(s) labelled codeagent.io/network=none (CNI codeagent-none); NetworkPolicy not enforced there, nor needed", len(nodes.Items))
	}
	pods, err := api.pods("kube-system").List(ctx, metav1.ListOptions{})
	if err != nil {
		return "unknown (kube-system not readable): the deny-all NetworkPolicy holds only with a CNI that enforces policies (Calico, Cilium, ...)"
	}
	for _, p := range pods.Items {
		for _, cni := range []string{"calico", "cilium", "antrea", "kube-router", "weave", "canal"} {
			if strings.Contains(p.Name, cni) {
				return "deny-all NetworkPolicy, enforced by " + cni + " (seen in kube-system)"
			}
		}
	}
	return "deny-all NetworkPolicy, but no policy-enforcing CNI was recognized: sandbox Pods may reach the network"
}
