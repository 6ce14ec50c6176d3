package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/codeagent/codeagent/internal/pyindex"
)

// kubeOrSkip returns the test cluster's kubeconfig (.ci/run starts one
// with scripts/kube-local.sh and sets CODEAGENT_KUBECONFIG), or skips.
func kubeOrSkip(t *testing.T) string {
	t.Helper()
	kc := os.Getenv("CODEAGENT_KUBECONFIG")
	if kc == "" {
		t.Skip("CODEAGENT_KUBECONFIG is not set: start a cluster with scripts/kube-local.sh up (.ci/run does)")
	}
	t.Setenv("CODEAGENT_KUBE_RUNTIME_CLASS", "")
	t.Setenv("CODEAGENT_KUBE_SECCOMP_PROFILE", "")
	return kc
}

// weakPods are the flags of Pods as a cluster's defaults make them: the
// node's runtime and RuntimeDefault seccomp.
var weakPods = []string{"--runtime-class", "default", "--seccomp-profile", "RuntimeDefault"}

// TestKubeDoctorIsolation: doctor --backend kubernetes runs the isolation
// probe in a Pod and prints each check; with the defaults (codeagent's
// runtime class and profile on the local cluster) all pass, with the
// cluster's defaults it names what is not refused and exits 1.
func TestKubeDoctorIsolation(t *testing.T) {
	kc := kubeOrSkip(t)
	code, out, errOut := runCLI(t, "", "doctor", "--backend", "kubernetes", "--kubeconfig", kc)
	if code != 0 || !strings.Contains(out, "runtime class:     codeagent") || !strings.Contains(out, "seccomp profile:   codeagent.json") {
		t.Fatalf("doctor with the defaults: exit %d\n%s%s", code, out, errOut)
	}
	for _, c := range []string{"io_uring_setup", "ptrace", "unshare", "keyctl", "bpf", "i386", "processes", "proc", "token", "network"} {
		if !strings.Contains(out, "  ok   "+c+" ") {
			t.Errorf("check %s not shown as passed:\n%s", c, out)
		}
	}
	code, out, _ = runCLI(t, "", append([]string{"doctor", "--backend", "kubernetes", "--kubeconfig", kc}, weakPods...)...)
	if code != exitFailure || !strings.Contains(out, "FAIL io_uring_setup") || !strings.Contains(out, "FAIL ptrace") ||
		!strings.Contains(out, "FAIL processes") || !strings.Contains(out, "codeagent refuses to run programs") {
		t.Fatalf("doctor on weak Pods: exit %d\n%s", code, out)
	}
}

// TestKubeWeakPodsRefused is a user's side of a cluster whose Pods run
// weaker than required: exec exits 125 naming what and how to fix it, and
// its program never runs; serve answers 503; with --allow-weak-isolation
// the program runs and its JSON result says what is weaker.
func TestKubeWeakPodsRefused(t *testing.T) {
	kc := kubeOrSkip(t)
	ws := t.TempDir()
	prog := writeProgram(t, "w.py", "open('ran.txt', 'w').write('x')\nprint('ran')")
	args := append([]string{"exec", "--backend", "kubernetes", "--kubeconfig", kc, "--workdir", ws}, weakPods...)
	code, out, errOut := runCLI(t, "", append(args, prog)...)
	if code != exitSandbox || !strings.Contains(errOut, "io_uring_setup") || !strings.Contains(errOut, "--allow-weak-isolation") ||
		!strings.Contains(errOut, "docs/KUBERNETES.md") || strings.Contains(out, "ran") {
		t.Fatalf("exec on weak Pods: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	if _, err := os.Stat(ws + "/ran.txt"); err == nil {
		t.Fatal("the program ran")
	}
	code, out, errOut = runCLI(t, "", append(args, "--allow-weak-isolation", "--json", prog)...)
	var res struct {
		Status        string   `json:"status"`
		WeakIsolation []string `json:"weak_isolation"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res.Status != "ok" || len(res.WeakIsolation) < 3 {
		t.Fatalf("with --allow-weak-isolation: exit %d\n%s\n%s", code, out, errOut)
	}

	base, _, _ := startServe(t, append([]string{"--backend", "kubernetes", "--kubeconfig", kc, "--no-token", "--data-dir", t.TempDir()}, weakPods...)...)
	status, body, _ := call(t, "POST", base+"/v1/exec", `{"language":"python","code":"print(1)"}`)
	if status != 503 || !strings.Contains(body, "io_uring_setup") {
		t.Fatalf("serve on weak Pods: %d %s", status, body)
	}
}

// TestKubeDependencies: on the kubernetes backend an environment is
// installed in a Pod from a directory of wheels (--find-links; Pods get
// no network) and reaches the program's Pod read-only; the second exec
// uses the cached environment; an index is refused with the way out.
func TestKubeDependencies(t *testing.T) {
	kc := kubeOrSkip(t)
	var dists []pyindex.Dist
	for _, w := range []struct{ name, version, file, code string }{
		{"seabird", "1.0", "seabird/__init__.py", "import gull\nVALUE = 40 + gull.TWO\n"},
		{"gull", "0.7", "gull/__init__.py", "TWO = 2\n"},
	} {
		var requires []string
		if w.name == "seabird" {
			requires = []string{"gull>=0.5"}
		}
		fn, data, err := pyindex.Wheel(w.name, w.version, map[string]string{w.file: w.code}, requires)
		if err != nil {
			t.Fatal(err)
		}
		dists = append(dists, pyindex.Dist{Project: w.name, Filename: fn, Data: data})
	}
	wheels := filepath.Join(t.TempDir(), "wheels")
	if err := pyindex.WriteWheelhouse(wheels, dists...); err != nil {
		t.Fatal(err)
	}
	dir, data := t.TempDir(), t.TempDir()
	prog := writeProgram(t, "p.py", "import os, seabird\nprint(seabird.VALUE)\ntry:\n    open(seabird.__file__, 'a')\nexcept OSError as e:\n    print('read-only', e.errno)\n")
	args := []string{"exec", "--backend", "kubernetes", "--kubeconfig", kc, "--data-dir", data, "--find-links", wheels, "--require", "seabird==1.0", prog}
	code, stdout, stderr := runBinary(t, dir, nil, args...)
	if code != 0 || stdout != "42\nread-only 30\n" || !strings.Contains(stderr, "installing seabird==1.0") {
		t.Fatalf("first exec: %d %q %q", code, stdout, stderr)
	}
	code, stdout, stderr = runBinary(t, dir, nil, args...)
	if code != 0 || stdout != "42\nread-only 30\n" || strings.Contains(stderr, "installing") {
		t.Fatalf("second exec (cached): %d %q %q", code, stdout, stderr)
	}
	code, _, stderr = runBinary(t, dir, nil, "exec", "--backend", "kubernetes", "--kubeconfig", kc, "--data-dir", data,
		"--index-url", "http://127.0.0.1:9/simple/", "--require", "seabird==1.0", prog)
	if code != exitUsage || !strings.Contains(stderr, "--find-links") {
		t.Fatalf("an index on kubernetes: %d %q", code, stderr)
	}
}
