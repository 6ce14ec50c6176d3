package deps_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/codeagent/codeagent/deps"
	"github.com/codeagent/codeagent/internal/npmreg"
	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/sandbox/backends"
)

// flock is a registry of two packages, kiwi needing moa, and a scoped
// one.
func flock(t *testing.T) *npmreg.Registry {
	return npmreg.New(t,
		npmreg.Package{Name: "kiwi", Version: "1.0.0", Dependencies: map[string]string{"moa": "^2.0.0"},
			Files: map[string]string{"index.js": "exports.x = 40 + require('moa').two\n"}},
		npmreg.Package{Name: "kiwi", Version: "1.1.0", Files: map[string]string{"index.js": "exports.x = 11\n"}},
		npmreg.Package{Name: "moa", Version: "2.0.1", Files: map[string]string{"index.js": "exports.two = 2\n"}},
		npmreg.Package{Name: "@birds/emu", Version: "0.1.0", Files: map[string]string{"index.js": "module.exports = 'emu'\n"}})
}

// runNode runs a node program with lease's environment (none when nil).
func runNode(t *testing.T, lease *deps.Lease, code string) sandbox.Result {
	t.Helper()
	spec := sandbox.Spec{Command: []string{"node", "-e", code}, Workspace: t.TempDir(),
		Limits: sandbox.Limits{WallTime: time.Minute}}
	if lease != nil {
		lease.Apply(&spec)
	}
	res, err := realSandbox(t).Run(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestNPMInstallUseAndReuseOffline(t *testing.T) {
	reg := flock(t)
	s := newStore(t)
	ctx := context.Background()
	req := deps.Request{JavaScript: []string{"kiwi@1.0.0", "@birds/emu"}, NPMRegistry: reg.URL()}
	lease, err := s.Ensure(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if !lease.Installed || len(lease.Packages) != 3 || reg.Downloads() != 3 {
		t.Fatalf("first use: installed %v, packages %+v, %d tarballs fetched", lease.Installed, lease.Packages, reg.Downloads())
	}
	for _, p := range lease.Packages {
		if p.Lang != "javascript" || p.Version == "" || !strings.HasPrefix(p.Integrity, "sha512-") {
			t.Errorf("package without version or integrity: %+v", p)
		}
	}
	res := runNode(t, lease, "console.log(require('kiwi').x, require('@birds/emu'))")
	if res.Status != sandbox.StatusOK || strings.TrimSpace(string(res.Stdout)) != "42 emu" {
		t.Fatalf("with the environment: %s %q %q", res.Status, res.Stdout, res.Stderr)
	}
	// ...but may neither change them nor reach the registry.
	res = runNode(t, lease, `
const fs = require('fs');
for (const f of ['/deps/js/node_modules/kiwi/index.js', '/deps/js/new.js']) {
  try { fs.appendFileSync(f, 'x'); console.log('wrote', f) } catch (e) {}
}
fetch('`+reg.URL()+`kiwi', {signal: AbortSignal.timeout(5000)}).then(() => console.log('reached the registry'), () => {});
`)
	if res.Status != sandbox.StatusOK || len(res.Stdout) != 0 {
		t.Fatalf("the run phase changed the environment or reached the registry: %s %q %q", res.Status, res.Stdout, res.Stderr)
	}
	lease.Release()
	before := reg.Requests()

	// The same request, in another order, is a hit without the registry;
	// with the registry gone it still works.
	reg.Close()
	again, err := s.Ensure(ctx, deps.Request{JavaScript: []string{" @birds/emu", "kiwi@1.0.0"}, NPMRegistry: reg.URL()})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Release()
	if again.Installed || again.Key != lease.Key || reg.Requests() != before {
		t.Errorf("second use installed again (%v) or asked the registry (%d requests, %d before)", again.Installed, reg.Requests(), before)
	}
	if res := runNode(t, again, "console.log(require('kiwi').x)"); strings.TrimSpace(string(res.Stdout)) != "42" {
		t.Errorf("offline: %s %q %q", res.Status, res.Stdout, res.Stderr)
	}
	// A program that did not declare it does not have it.
	if res := runNode(t, nil, "require('kiwi')"); res.Status == sandbox.StatusOK || !strings.Contains(string(res.Stderr), "Cannot find module 'kiwi'") {
		t.Errorf("without the environment: %s %q", res.Status, res.Stderr)
	}
}

// One environment holds Python and JavaScript packages, each installed
// from its own index.
func TestPythonAndJavaScriptInOneEnvironment(t *testing.T) {
	ix, reg := birds(t), flock(t)
	s := newStore(t)
	lease, err := s.Ensure(context.Background(), deps.Request{Python: []string{"gull"}, IndexURL: ix.URL(),
		JavaScript: []string{"moa"}, NPMRegistry: reg.URL()})
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release()
	if len(lease.Packages) != 2 {
		t.Errorf("packages %+v", lease.Packages)
	}
	if res := run(t, lease, "import gull; print(gull.TWO)"); strings.TrimSpace(string(res.Stdout)) != "2" {
		t.Errorf("python: %s %q", res.Status, res.Stderr)
	}
	if res := runNode(t, lease, "console.log(require('moa').two)"); strings.TrimSpace(string(res.Stdout)) != "2" {
		t.Errorf("node: %s %q", res.Status, res.Stderr)
	}
}

// A package's install script does not run unless allowed, and then only
// inside the install's sandbox.
func TestNPMInstallScriptsAreOff(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "pwned")
	script := "node -e \"for (const p of ['" + marker + "', '/workspace/js/scripted']) { try { require('fs').writeFileSync(p, 'x') } catch (e) {} }\""
	reg := npmreg.New(t, npmreg.Package{Name: "tui", Version: "1.0.0", Files: map[string]string{"index.js": "exports.ok = 1\n"},
		Scripts: map[string]string{"postinstall": script, "preinstall": script}})
	s := newStore(t)
	lease, err := s.Ensure(context.Background(), deps.Request{JavaScript: []string{"tui"}, NPMRegistry: reg.URL()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(lease.Dir, "ws", "js", "scripted")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("an install script ran without being allowed")
	}
	lease.Release()
	lease, err = s.Ensure(context.Background(), deps.Request{JavaScript: []string{"tui"}, NPMRegistry: reg.URL(), AllowSource: true})
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release()
	if _, err := os.Lstat(filepath.Join(lease.Dir, "ws", "js", "scripted")); err != nil {
		t.Errorf("the allowed install script did not run: %v", err)
	}
	if _, err := os.Lstat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the install script wrote the host's %s", marker)
	}
}

func TestNPMFailedInstallLeavesNothing(t *testing.T) {
	reg := flock(t)
	s := newStore(t)
	for _, c := range []struct{ spec, want string }{
		{"takahe", "takahe"},
		{"kiwi@3.0.0", "kiwi@3.0.0"},
	} {
		_, err := s.Ensure(context.Background(), deps.Request{JavaScript: []string{"moa", c.spec}, NPMRegistry: reg.URL()})
		var ie *deps.InstallError
		if !errors.As(err, &ie) || !strings.Contains(ie.Message, c.want) {
			t.Errorf("%s: got %v, want an install error naming %s", c.spec, err, c.want)
		}
	}
	reg.Close()
	_, err := s.Ensure(context.Background(), deps.Request{JavaScript: []string{"moa"}, NPMRegistry: reg.URL()})
	var ie *deps.InstallError
	if !errors.As(err, &ie) || !ie.Unreachable || !strings.Contains(ie.Message, "could not be reached") {
		t.Errorf("registry gone: got %v, want an install error saying the registry could not be reached", err)
	}
	envs, _ := s.List()
	left, _ := filepath.Glob(filepath.Join(s.Dir, ".staging-*"))
	if len(envs) != 0 || len(left) != 0 {
		t.Errorf("a failed install left %v and %v", envs, left)
	}
}

// TestNPMOnDocker: the Docker image has npm; an install there runs in a
// container of its own that reaches only the registry, and a program in
// another container requires the packages, which it cannot change.
func TestNPMOnDocker(t *testing.T) {
	dsb, err := backends.Open("docker", backends.Options{})
	if err != nil {
		t.Skipf("no docker here: %v", err)
	}
	defer dsb.Close()
	reg := flock(t)
	s := &deps.Store{Dir: filepath.Join(t.TempDir(), "envs"), Sandbox: dsb, Platform: "docker-test", Limits: sandbox.Limits{WallTime: 3 * time.Minute}}
	lease, err := s.Ensure(context.Background(), deps.Request{JavaScript: []string{"kiwi@1.0.0"}, NPMRegistry: reg.URL()})
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release()
	if len(lease.Packages) != 2 {
		t.Fatalf("packages %+v", lease.Packages)
	}
	spec := sandbox.Spec{Command: []string{"node", "-e", "const fs = require('fs'); let w = 'no write'; try { fs.appendFileSync(require.resolve('kiwi'), 'x'); w = 'wrote' } catch (e) {}; console.log(require('kiwi').x, w)"},
		Workspace: t.TempDir(), Limits: sandbox.Limits{WallTime: time.Minute}}
	lease.Apply(&spec)
	res, err := dsb.Run(context.Background(), spec)
	if err != nil || res.Status != sandbox.StatusOK || strings.TrimSpace(string(res.Stdout)) != "42 no write" {
		t.Fatalf("a program with the environment: %v %s %q %q", err, res.Status, res.Stdout, res.Stderr)
	}
}
