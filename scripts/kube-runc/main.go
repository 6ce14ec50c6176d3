// Command kube-runc is the runtime handler "codeagent" of the local test
// cluster (scripts/kube-local.sh): containerd's runc shim calls it instead
// of runc, and it hardens each container's OCI spec the way the Docker
// backend asks its engine to, where the Kubernetes API has no field for it:
//
//   - /proc entries that describe the host (sandbox.MaskedProc) are masked,
//     beside the kubelet's own list;
//   - /sys is a read-only, empty tmpfs, with only the container's cgroup
//     below it (the pod agent reads its CPU time, peak memory and OOM kills
//     there);
//   - the annotation codeagent.io/pids-max sets the container's pids limit
//     (the kubelet's own limit is one per node);
//   - on cgroup v1, socket buffers get a limit of a quarter of the memory
//     limit (memory.kmem.tcp), which runc ≥ 1.1 no longer sets: without it
//     they are not charged at all.
//
// Every other call is passed to runc unchanged. With --print-seccomp-profile
// it prints the Docker backend's seccomp profile, which kube-local.sh
// installs as the kubelet's Localhost profile codeagent.json.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"

	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/sandbox/docker"
)

// runc is the real runtime.
var runc = envOr("CODEAGENT_RUNC", "/usr/sbin/runc")

// PidsAnnotation carries the pids limit of a sandbox Pod.
const PidsAnnotation = "codeagent.io/pids-max"

func main() {
	if len(os.Args) == 2 && os.Args[1] == "--print-seccomp-profile" {
		b, err := docker.SeccompProfile()
		if err != nil {
			fatal(err)
		}
		os.Stdout.Write(append(b, '\n'))
		return
	}
	cmd, bundle := command(os.Args[1:])
	if cmd != "create" && cmd != "run" {
		execRunc()
	}
	spec, err := harden(bundle)
	if err != nil {
		fatal(err)
	}
	c := exec.Command(runc, os.Args[1:]...)
	c.Stdin, c.Stdout, c.Stderr = os.Stdin, os.Stdout, os.Stderr
	err = c.Run()
	if err == nil && cmd == "create" {
		err = socketLimit(spec)
	}
	if ee, ok := err.(*exec.ExitError); ok {
		os.Exit(ee.ExitCode())
	}
	if err != nil {
		fatal(err)
	}
}

func execRunc() {
	err := syscall.Exec(runc, append([]string{runc}, os.Args[1:]...), os.Environ())
	fatal(err)
}

// command finds runc's subcommand and the --bundle (or -b) of create and run.
func command(args []string) (cmd, bundle string) {
	withValue := map[string]bool{"--root": true, "--log": true, "--log-format": true, "--criu": true, "--rootless": true}
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case cmd == "" && withValue[a]:
			i++
		case cmd == "" && len(a) > 0 && a[0] != '-':
			cmd = a
		case cmd != "" && (a == "--bundle" || a == "-b") && i+1 < len(args):
			bundle = args[i+1]
			i++
		case cmd != "" && len(a) > 9 && a[:9] == "--bundle=":
			bundle = a[9:]
		}
	}
	if bundle == "" {
		bundle, _ = os.Getwd()
	}
	return cmd, bundle
}

// harden rewrites the bundle's config.json and returns it as read.
func harden(bundle string) (map[string]any, error) {
	p := filepath.Join(bundle, "config.json")
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("read spec: %w", err)
	}
	var spec map[string]any
	if err := json.Unmarshal(b, &spec); err != nil {
		return nil, fmt.Errorf("parse spec: %w", err)
	}
	linux, _ := spec["linux"].(map[string]any)
	if linux == nil {
		return spec, nil
	}
	masked, _ := linux["maskedPaths"].([]any)
	for _, m := range sandbox.MaskedProc {
		if !slices.Contains(masked, any(m)) {
			masked = append(masked, m)
		}
	}
	linux["maskedPaths"] = masked
	if mounts, ok := spec["mounts"].([]any); ok {
		for _, m := range mounts {
			mm, _ := m.(map[string]any)
			if mm["destination"] == "/sys" && mm["type"] == "sysfs" {
				mm["type"], mm["source"] = "tmpfs", "tmpfs"
				mm["options"] = []any{"nosuid", "noexec", "nodev", "ro", "size=4k", "mode=0555"}
			}
		}
	}
	if ann, ok := spec["annotations"].(map[string]any); ok {
		if s, ok := ann[PidsAnnotation].(string); ok {
			if n, err := strconv.ParseInt(s, 10, 64); err == nil && n > 0 {
				res, _ := linux["resources"].(map[string]any)
				if res == nil {
					res = map[string]any{}
					linux["resources"] = res
				}
				res["pids"] = map[string]any{"limit": n}
			}
		}
	}
	out, err := json.Marshal(spec)
	if err != nil {
		return nil, fmt.Errorf("write spec: %w", err)
	}
	if err := os.WriteFile(p, out, 0o644); err != nil {
		return nil, fmt.Errorf("write spec: %w", err)
	}
	return spec, nil
}

// socketLimit sets memory.kmem.tcp.limit_in_bytes in the container's
// cgroup on cgroup v1 (cgroupfs paths), as the Docker backend does.
func socketLimit(spec map[string]any) error {
	linux, _ := spec["linux"].(map[string]any)
	path, _ := linux["cgroupsPath"].(string)
	res, _ := linux["resources"].(map[string]any)
	mem, _ := res["memory"].(map[string]any)
	limit, _ := mem["limit"].(float64)
	if path == "" || limit <= 0 || path[0] != '/' {
		return nil
	}
	f := filepath.Join("/sys/fs/cgroup/memory", path, "memory.kmem.tcp.limit_in_bytes")
	if _, err := os.Stat(f); err != nil {
		return nil // cgroup v2 charges socket buffers to memory.max
	}
	tcp := max(int64(limit)/4, 1<<20) &^ 4095
	if err := os.WriteFile(f, []byte(strconv.FormatInt(tcp, 10)), 0o644); err != nil {
		return fmt.Errorf("socket memory limit: %w", err)
	}
	return nil
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "kube-runc:", err)
	os.Exit(1)
}
