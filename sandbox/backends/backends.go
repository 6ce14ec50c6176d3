// Package backends is the one place where sandbox backends are registered
// and chosen by name.
package backends

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/codeagent/codeagent/egress"
	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/sandbox/docker"
	"github.com/codeagent/codeagent/sandbox/kubernetes"
	"github.com/codeagent/codeagent/sandbox/namespace"
)

// Options configure whichever backend is opened.
type Options struct {
	// AllowWeakIsolation accepts rlimits where cgroups are missing; for
	// docker, socket buffers without a limit on cgroup v1 without root; for
	// kubernetes, Pods where its isolation probe found something not
	// refused (each result then says what).
	AllowWeakIsolation bool
	// Warm is how many sandboxes to start ahead; 0 for a single execution.
	// For docker it is the number of idle containers per limits class.
	Warm int
	// WarmPython is how many warm interpreters the namespace backend
	// keeps (namespace.Config.WarmPython; as root only). Docker and
	// Kubernetes ignore it: their programs run as before.
	WarmPython int
	// Image is the docker and kubernetes backends' image; their
	// DefaultImage when empty.
	Image string
	// DockerHost is the docker backend's engine address; empty means
	// DOCKER_HOST or the default socket.
	DockerHost string
	// Kubernetes configures the kubernetes backend beyond Image and Warm.
	Kubernetes KubernetesOptions
	Logger     *slog.Logger
}

// KubernetesOptions are the kubernetes backend's own settings; empty
// fields take its defaults (see kubernetes.Config).
type KubernetesOptions struct {
	Kubeconfig, Namespace, RuntimeClass, SeccompProfile string
}

// ErrUnknown is wrapped by Open's error for a name it does not know.
var ErrUnknown = errors.New("unknown sandbox backend")

// Names lists the backends that Open accepts, "auto" first.
func Names() []string { return []string{"auto", "namespace", "docker", "kubernetes"} }

// Open returns the backend called name; "" and "auto" choose the namespace
// backend. Errors from a backend that cannot run here are *sandbox.SetupError.
// Every backend comes with its egress proxy (egress.Wrap, the layer
// sandbox.Stack puts next to the backend): a Spec with a Network reaches
// the hosts it allows, any other no network at all.
func Open(name string, opts Options) (sandbox.Sandbox, error) {
	sb, err := open(name, opts)
	if err != nil {
		return nil, err
	}
	return sandbox.Stack(sb, sandbox.Layers{Egress: egress.Wrap}), nil
}

func open(name string, opts Options) (sandbox.Sandbox, error) {
	switch name {
	case "", "auto", "namespace":
		b, err := namespace.New(namespace.Config{AllowWeakIsolation: opts.AllowWeakIsolation, Warm: opts.Warm,
			WarmPython: opts.WarmPython, Logger: opts.Logger})
		if err != nil {
			return nil, err
		}
		return b, nil
	case "docker":
		b, err := docker.New(docker.Config{Image: opts.Image, Host: opts.DockerHost, Warm: opts.Warm, Logger: opts.Logger,
			AllowWeakIsolation: opts.AllowWeakIsolation})
		if err != nil {
			return nil, err
		}
		return b, nil
	case "kubernetes":
		k := opts.Kubernetes
		b, err := kubernetes.New(kubernetes.Config{Kubeconfig: k.Kubeconfig, Namespace: k.Namespace, Image: opts.Image,
			RuntimeClass: k.RuntimeClass, SeccompProfile: k.SeccompProfile, Warm: opts.Warm, Logger: opts.Logger,
			AllowWeakIsolation: opts.AllowWeakIsolation})
		if err != nil {
			return nil, err
		}
		return b, nil
	}
	return nil, fmt.Errorf("%w %q (want one of %s)", ErrUnknown, name, strings.Join(Names(), ", "))
}
