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
	fs.StringVar(backend, "backend", "", "sandbox backend: auto, namespace, docker or kubernetes (default: the manifest's, else auto)")
	fs.BoolVar(weak, "allow-weak-isolation", false, weakIsolationUsage)
	return addBackendFlags(fs)
}

func addBackendFlags(fs *flag.FlagSet) *backendFlags {
	b := &backendFlags{}
	fs.StringVar(&b.Image, "image", "", "docker and kubernetes: the sandbox image (default codeagent-sandbox:latest)")
	fs.StringVar(&b.Kube.Kubeconfig, "kubeconfig", "", "kubernetes: kubeconfig file (default $KUBECONFIG, in-cluster, ~/.kube/config)")
	fs.StringVar(&b.Kube.Namespace, "namespace", "", "kubernetes: the sandbox Pods' namespace (default the kubeconfig's, or the server Pod's own)")
	fs.StringVar(&b.Kube.RuntimeClass, "runtime-class", "", "kubernetes: the Pods' runtime class, e.g. gvisor or kata, or default for the node's runtime\n"+
		"(default codeagent where the cluster has it)")
	fs.StringVar(&b.Kube.SeccompProfile, "seccomp-profile", "", "kubernetes: a Localhost seccomp profile in the kubelet's directory, or RuntimeDefault\n"+
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
const weakIsolationUsage = "accept isolation weaker than required (rlimits without cgroups, Pods failing the probe)"

// openBackend opens the sandbox of every command: backends.Open, which a
// test replaces to see what each door asks of the sandbox.
var openBackend = backends.Open
