package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/codeagent/codeagent/sandbox/kubernetes"
)

// kubeDoctor reports what the cluster offers the kubernetes backend and,
// when it can run there, what its isolation probe finds in a sandbox Pod
// (one Pod start). weak judges the Pods as --allow-weak-isolation would.
func kubeDoctor(ctx context.Context, s stdio, bf *backendFlags, weak bool) int {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
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
	if !r.Usable() {
		fmt.Fprintf(w, "backend:           none: the backend cannot run in this namespace\n")
		for _, p := range r.Problems {
			fmt.Fprintf(w, "missing: %s\n", p)
		}
		return exitFailure
	}
	// The same probe the backend runs before its first program.
	cfg.AllowWeakIsolation = true
	b, err := kubernetes.New(cfg)
	if err != nil {
		fmt.Fprintf(w, "isolation:         not checked: %v\n", err)
		fmt.Fprintf(w, "backend:           none: codeagent refuses to run programs here\n")
		return exitFailure
	}
	defer b.Close()
	iso, err := b.Isolation(ctx)
	if err != nil {
		fmt.Fprintf(w, "isolation:         not checked: %v\n", err)
		return exitFailure
	}
	printIsolation(w, iso)
	switch failed := iso.Failed(); {
	case len(failed) == 0:
		fmt.Fprintf(w, "backend:           kubernetes\n")
	case weak:
		fmt.Fprintf(w, "backend:           kubernetes, with weaker isolation (--allow-weak-isolation; every result says so)\n")
	default:
		fmt.Fprintf(w, "backend:           none: codeagent refuses to run programs in these Pods (docs/KUBERNETES.md, \"Isolation\")\n")
		return exitFailure
	}
	ts, err := b.TrustStore(ctx)
	printTrust(w, ts, err)
	return exitOK
}

// printIsolation prints the isolation probe's template and each check.
func printIsolation(w io.Writer, iso kubernetes.Isolation) {
	rc := iso.RuntimeClass
	if rc == "" {
		rc = "the node's default"
	}
	fmt.Fprintf(w, "runtime class:     %s\n", rc)
	fmt.Fprintf(w, "seccomp profile:   %s\n", iso.SeccompProfile)
	if iso.Note != "" {
		fmt.Fprintf(w, "chosen:            %s\n", iso.Note)
	}
	fmt.Fprintf(w, "isolation probe:   %d checks in a sandbox Pod\n", len(iso.Checks))
	for _, c := range iso.Checks {
		mark := "ok  "
		if !c.OK {
			mark = "FAIL"
		}
		fmt.Fprintf(w, "  %s %-15s %s\n", mark, c.Name, c.Detail)
	}
}

func prefix(p string, l []string) []string {
	out := make([]string, len(l))
	for i, x := range l {
		out[i] = p + x
	}
	return out
}
