package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/sandbox/namespace"
)

func cmdDoctor(ctx context.Context, s stdio, args []string) int {
	fs := newFlagSet("doctor", s)
	weak := fs.Bool("allow-weak-isolation", false, "judge the host as if weaker isolation were accepted")
	backend := fs.String("backend", "", "report on this backend: namespace (the default: this host), docker (the engine, the image,\n"+
		"a program run in a container) or kubernetes (the cluster and its isolation probe)")
	bf := addBackendFlags(fs)
	if code, done := parseNoArgs(fs, args, s); done {
		return code
	}
	switch *backend {
	case "", "auto", "namespace":
	case "docker":
		return dockerDoctor(ctx, s, bf, *weak)
	case "kubernetes":
		return kubeDoctor(ctx, s, bf, *weak)
	default:
		return usageLine(fs, s, "unknown backend %q (want namespace, docker or kubernetes)", *backend)
	}
	rep := namespace.Probe(namespace.Config{AllowWeakIsolation: *weak})
	printDoctor(s.out, rep)
	ts, err := namespace.HostTrustStore()
	printTrust(s.out, ts, err)
	if !rep.Usable {
		return exitFailure
	}
	return exitOK
}

func printDoctor(w io.Writer, r namespace.Report) {
	yes := func(b bool) string {
		if b {
			return "yes"
		}
		return "no"
	}
	bw := r.Bwrap
	if bw == "" {
		bw = "not found"
	} else if r.BwrapVersion != "" {
		bw += " (" + r.BwrapVersion + ")"
	}
	cg := "none"
	if r.CgroupVersion > 0 {
		cg = fmt.Sprintf("v%d", r.CgroupVersion)
	} else if r.CgroupDetail != "" {
		cg += " (" + r.CgroupDetail + ")"
	}
	landlock := "no"
	if r.LandlockABI > 0 {
		landlock = fmt.Sprintf("yes (ABI %d; not used yet)", r.LandlockABI)
	}
	fmt.Fprintf(w, "bubblewrap:        %s\n", bw)
	fmt.Fprintf(w, "namespaces:        %s (user, pid, mount, network, ipc, uts, cgroup)\n", yes(r.UserNamespaces))
	fmt.Fprintf(w, "seccomp:           %s\n", yes(r.Seccomp))
	fmt.Fprintf(w, "landlock:          %s\n", landlock)
	fmt.Fprintf(w, "cgroups:           %s\n", cg)
	fmt.Fprintf(w, "memory limit by:   %s\n", r.MemoryLimit)
	fmt.Fprintf(w, "process limit by:  %s\n", r.ProcessLimit)
	fmt.Fprintf(w, "CPU limit by:      %s\n", r.CPULimit)
	fmt.Fprintf(w, "disk limit by:     %s\n", r.DiskLimit)
	fmt.Fprintf(w, "running as root:   %s\n", yes(r.Root))
	if r.ProgramUIDCount > 1 {
		fmt.Fprintf(w, "programs run as:   host uids %d-%d (%s)\n", r.ProgramUID, r.ProgramUID+r.ProgramUIDCount-1, r.ProgramUIDNote)
	} else {
		fmt.Fprintf(w, "programs run as:   host uid %d (%s)\n", r.ProgramUID, r.ProgramUIDNote)
	}
	fmt.Fprintf(w, "network egress:    %s\n", egressSupport(r.Root))
	backend := "namespace (bubblewrap)"
	if !r.Usable {
		backend = "none: codeagent refuses to run programs on this host"
	}
	fmt.Fprintf(w, "backend:           %s\n", backend)
	for _, p := range r.Problems {
		fmt.Fprintf(w, "missing: %s\n", strings.TrimSpace(p))
	}
	for _, x := range r.Warnings {
		fmt.Fprintf(w, "warning: %s\n", strings.TrimSpace(x))
	}
}

// printTrust says which certificate authorities the backend's sandboxes
// trust (what --ca-cert adds to).
func printTrust(w io.Writer, ts sandbox.TrustStore, err error) {
	switch {
	case err != nil:
		fmt.Fprintf(w, "certificates:      not known: %s\n", strings.ReplaceAll(err.Error(), "\n", " "))
	case ts.Authorities == 0:
		fmt.Fprintf(w, "certificates:      none (%s): programs and installs cannot check any HTTPS host; install ca-certificates\n", ts.Source)
	default:
		fmt.Fprintf(w, "certificates:      %s (%d authorities)\n", ts.Source, ts.Authorities)
	}
}

// egressSupport says how --allow-host gets its proxy's listener into a
// sandbox: as root by entering its network namespace, otherwise by a
// helper (nsenter and python3 from the host's /usr) that must be there.
func egressSupport(root bool) string {
	if root {
		return "by allow list (--allow-host; the proxy's listener made in the sandbox's network namespace)"
	}
	for _, p := range []string{"/usr/bin/nsenter", "/usr/bin/python3"} {
		if _, err := os.Stat(p); err != nil {
			return "no: " + p + " is missing (util-linux, python3), which opens the proxy's listener in a sandbox run by a user"
		}
	}
	return "by allow list (--allow-host; the proxy's listener opened in the sandbox by nsenter and python3)"
}
