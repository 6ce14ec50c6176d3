package main

import (
	"flag"

	"github.com/codeagent/codeagent/sandbox/backends"
)

// backendFlags configure the backend chosen with --backend beyond its
// name: the image of the docker and kubernetes backends, and the
// kubernetes backend's cluster settings (empty: their defaults and the
// CODEAGENT_KUBE_* variables).
type backendFlags struct {
	Image string
	Kube  backends.KubernetesOptions
}

// addSandboxFlags registers what every command that runs programs takes
// alike: --backend (into backend), --allow-weak-isolation (into weak) and
// the backend's own flags.
func addSandboxFlags(fs *flag.FlagSet, backend *string, weak *bool) *backendFlags {
	fs.StringVar(backend, "backend", "", "sandbox backend: auto (namespace), namespace, docker or kubernetes\n"+
		"(default auto; with a manifest, its agent.backend)")
	fs.BoolVar(weak, "allow-weak-isolation", false, weakIsolationUsage)
	return addBackendFlags(fs)
}

func addBackendFlags(fs *flag.FlagSet) *backendFlags {
	b := &backendFlags{}
	fs.StringVar(&b.Image, "image", "", "docker and kubernetes backends: the sandbox image (default codeagent-sandbox:latest)")
	fs.StringVar(&b.Kube.Kubeconfig, "kubeconfig", "", "kubernetes backend: kubeconfig file (default $KUBECONFIG, in-cluster, ~/.kube/config)")
	fs.StringVar(&b.Kube.Namespace, "namespace", "", "kubernetes backend: namespace of the sandbox Pods (default the kubeconfig's, or the server Pod's own)")
	fs.StringVar(&b.Kube.RuntimeClass, "runtime-class", "", "kubernetes backend: the Pods' runtime class, e.g. gvisor or kata, or default for the node's runtime\n"+
		"(default codeagent where the cluster has it)")
	fs.StringVar(&b.Kube.SeccompProfile, "seccomp-profile", "", "kubernetes backend: a Localhost seccomp profile in the kubelet's seccomp directory, or RuntimeDefault\n"+
		"(default codeagent.json where the node has it; docs/KUBERNETES.md)")
	return b
}

// options returns o with the flags' settings.
func (b *backendFlags) options(o backends.Options) backends.Options {
	if b == nil {
		return o
	}
	o.Image, o.Kubernetes = b.Image, b.Kube
	return o
}

// weakIsolationUsage is the help of --allow-weak-isolation.
const weakIsolationUsage = "run where isolation is weaker than required: rlimits where cgroups are missing; kubernetes Pods\n" +
	"where the isolation probe found something not refused (each result and audit record says what)"

// openBackend opens the sandbox of every command: backends.Open, which a
// test replaces to see what each door asks of the sandbox.
var openBackend = backends.Open
