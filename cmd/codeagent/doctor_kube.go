package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/codeagent/codeagent/sandbox/kubernetes"
)

// kubeDoctor reports what the cluster offers the kubernetes backend.
func kubeDoctor(ctx context.Context, s stdio, bf *backendFlags) int {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	cfg := kubernetes.Config{Kubeconfig: bf.Kube.Kubeconfig, Namespace: bf.Kube.Namespace, Image: bf.Image,
		RuntimeClass: bf.Kube.RuntimeClass, SeccompProfile: bf.Kube.SeccompProfile}
	r := kubernetes.Probe(ctx, cfg)
	w := s.out
	none := func(l []string, empty string) string {
		if len(l) == 0 {
			return empty
		}
		return strings.Join(l, ", ")
	}
	if !r.Reached {
		// Nothing past the connection is known: say so rather than print
		// defaults that read as findings.
		server := r.Server
		if server == "" {
			server = "not configured"
		}
		fmt.Fprintf(w, "cluster:           %s (not reached)\n", server)
		fmt.Fprintf(w, "backend:           kubernetes\n")
		for _, p := range r.Problems {
			fmt.Fprintf(w, "missing: %s\n", p)
		}
		return exitFailure
	}
	fmt.Fprintf(w, "cluster:           %s (%s)\n", r.Server, r.Version)
	fmt.Fprintf(w, "namespace:         %s\n", r.Namespace)
	rc := none(r.RuntimeClasses, "none (the nodes' default runtime only)")
	if r.RuntimeClassErr != "" {
		rc = "unknown: " + r.RuntimeClassErr
	}
	fmt.Fprintf(w, "runtime classes:   %s\n", rc)
	fmt.Fprintf(w, "network:           %s\n", r.Network)
	fmt.Fprintf(w, "permissions:       %s\n", none(prefix("missing ", r.Missing), "all the Role of docs/KUBERNETES.md grants"))
	fmt.Fprintf(w, "agent-sandbox:     %s\n", none(r.AgentSandbox, "not installed (Pods are managed directly)"))
	fmt.Fprintf(w, "backend:           kubernetes\n")
	for _, p := range r.Problems {
		fmt.Fprintf(w, "missing: %s\n", p)
	}
	if !r.Usable() {
		return exitFailure
	}
	return exitOK
}

func prefix(p string, l []string) []string {
	out := make([]string, len(l))
	for i, x := range l {
		out[i] = p + x
	}
	return out
}
