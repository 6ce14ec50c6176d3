package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/codeagent/codeagent/internal/npmreg"
	"github.com/codeagent/codeagent/llm/llmtest"
)

// kiwiRegistry serves kiwi 1.0.0, which needs moa.
func kiwiRegistry(t *testing.T) *npmreg.Registry {
	return npmreg.New(t,
		npmreg.Package{Name: "kiwi", Version: "1.0.0", Dependencies: map[string]string{"moa": "^2.0.0"},
			Files: map[string]string{"index.js": "exports.x = 40 + require('moa').two\n"}},
		npmreg.Package{Name: "moa", Version: "2.0.1", Files: map[string]string{"index.js": "exports.two = 2\n"}})
}

// exec --lang javascript with --require-js installs once from the
// registry named, then runs offline; the program cannot reach the
// registry; one that did not declare the package cannot require it; an
// unknown package, a spec codeagent does not install and packages of the
// wrong language are usage errors. On every local backend.
func TestExecWithJavaScriptDependencies(t *testing.T) {
	forBackends(t, func(t *testing.T, backend string) {
		reg := kiwiRegistry(t)
		data, dir := t.TempDir(), t.TempDir()
		prog := filepath.Join(dir, "prog.js")
		if err := os.WriteFile(prog, []byte("console.log(require('kiwi').x)\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		reach := filepath.Join(dir, "reach.js")
		if err := os.WriteFile(reach, []byte("fetch('"+reg.URL()+"kiwi', {signal: AbortSignal.timeout(5000)})"+
			".then(() => console.log('reached the registry'), () => console.log('no registry'))\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		base := []string{"exec", "--backend", backend, "--data-dir", data, "--npm-registry", reg.URL(), "--require-js", "kiwi@1.0.0"}
		code, stdout, stderr := runBinary(t, dir, nil, append(base, prog)...)
		if code != 0 || strings.TrimSpace(stdout) != "42" || !strings.Contains(stderr, "installing kiwi@1.0.0 from "+reg.URL()) {
			t.Fatalf("first exec: %d %q %q", code, stdout, stderr)
		}
		asked := reg.Requests()
		code, stdout, stderr = runBinary(t, dir, nil, append(base, reach)...)
		if code != 0 || strings.TrimSpace(stdout) != "no registry" || reg.Requests() != asked {
			t.Fatalf("the program reached the registry: %d %q %q", code, stdout, stderr)
		}
		reg.Close()
		code, stdout, stderr = runBinary(t, dir, nil, append(base, prog)...)
		if code != 0 || strings.TrimSpace(stdout) != "42" || strings.Contains(stderr, "installing") || reg.Requests() != asked {
			t.Fatalf("second exec, registry gone: %d %q %q", code, stdout, stderr)
		}
		if code, stdout, _ = runBinary(t, dir, nil, "envs", "list", "--data-dir", data); !strings.Contains(stdout, "kiwi@1.0.0 moa@2.0.1") {
			t.Errorf("envs list: %d %q", code, stdout)
		}
		code, _, stderr = runBinary(t, dir, nil, "exec", "--backend", backend, "--data-dir", data, prog)
		if code != 1 || !strings.Contains(stderr, "Cannot find module 'kiwi'") {
			t.Errorf("without dependencies: %d %q", code, stderr)
		}

		reg2 := kiwiRegistry(t)
		code, _, stderr = runBinary(t, dir, nil, "exec", "--backend", backend, "--data-dir", data, "--npm-registry", reg2.URL(),
			"--require-js", "takahe@1.0.0", prog)
		if code != 2 || !strings.Contains(stderr, "takahe") {
			t.Errorf("unknown package: %d %q", code, stderr)
		}
		py := filepath.Join(dir, "prog.py")
		if err := os.WriteFile(py, []byte("print(1)\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, bad := range [][]string{
			{"--require-js", "kiwi@file:../kiwi", prog},
			{"--require-js", "kiwi@npm:moa@2", prog},
			{"--require-js", "--registry=http://evil.example/", prog},
			{"--npm-registry", reg2.URL(), prog},
			{"--require-js", "kiwi", py},
			{"--require", "seabird", prog},
		} {
			args := append([]string{"exec", "--backend", backend, "--data-dir", data}, bad...)
			if code, _, stderr = runBinary(t, dir, nil, args...); code != 2 {
				t.Errorf("%v: %d %q, want a usage error", bad, code, stderr)
			}
		}
	})
}

// A JavaScript run in a folder with a package.json installs its
// dependencies (not its devDependencies), tells the model, gives every
// program the packages and audits the install; a manifest's
// agent.dependencies.javascript does the same.
func TestRunUsesThePackageJSON(t *testing.T) {
	reg := kiwiRegistry(t)
	dir, data := t.TempDir(), t.TempDir()
	pj := `{"name": "app", "dependencies": {"kiwi": "1.0.0"}, "devDependencies": {"jest": "29"}}`
	if err := os.WriteFile(filepath.Join(dir, "package.json"), []byte(pj), 0o644); err != nil {
		t.Fatal(err)
	}
	answer := llmtest.Say("```javascript\nconsole.log('value', require('kiwi').x)\n```")
	srv, flags := modelServer(t, answer)
	code, stdout, stderr := runBinary(t, dir, nil, append(append([]string{"run", "--lang", "javascript", "--data-dir", data,
		"--npm-registry", reg.URL()}, flags...), "--no-verify", "Print the kiwi value")...)
	if code != 0 || !strings.Contains(stdout, "value 42") || !strings.Contains(stderr, "installing kiwi@1.0.0") {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	if req := srv.Requests()[0].Text(); !strings.Contains(req, "installed for this task (load them with require): kiwi 1.0.0, moa 2.0.1") {
		t.Errorf("the model is not told what is installed:\n%s", req)
	}
	code, stdout, _ = runBinary(t, "", nil, "log", "--data-dir", data)
	if code != 0 || !strings.Contains(stdout, "dependencies") || !strings.Contains(stdout, "kiwi") {
		t.Errorf("the audit log lacks the install:\n%s", stdout)
	}

	man := filepath.Join(t.TempDir(), "codeagent.yaml")
	yaml := "agent:\n  tools:\n    - name: execute_javascript\n  dependencies:\n    javascript: [moa@2.0.1]\n    npm_registry: " + reg.URL() + "\n"
	if err := os.WriteFile(man, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	_, flags = modelServer(t, llmtest.Say("```javascript\nconsole.log('two', require('moa').two)\n```"))
	code, stdout, stderr = runBinary(t, "", nil, append(append([]string{"run", "--lang", "javascript", "--data-dir", data,
		"--manifest", man}, flags...), "--no-verify", "Print two")...)
	if code != 0 || !strings.Contains(stdout, "two 2") || !strings.Contains(stderr, "installing moa@2.0.1") {
		t.Fatalf("manifest: exit %d\n%s%s", code, stdout, stderr)
	}
}
