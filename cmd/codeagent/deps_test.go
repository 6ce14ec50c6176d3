package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/codeagent/codeagent/agent"
	"github.com/codeagent/codeagent/internal/pyindex"
	"github.com/codeagent/codeagent/llm/llmtest"
)

func birdIndex(t *testing.T) *pyindex.Index {
	t.Helper()
	var dists []pyindex.Dist
	for _, w := range []struct {
		name, version, file, code string
		requires                  []string
	}{
		{"seabird", "1.0", "seabird/__init__.py", "import gull\nVALUE = 40 + gull.TWO\n", []string{"gull>=0.5"}},
		{"gull", "0.7", "gull/__init__.py", "TWO = 2\n", nil},
	} {
		fn, data, err := pyindex.Wheel(w.name, w.version, map[string]string{w.file: w.code}, w.requires)
		if err != nil {
			t.Fatal(err)
		}
		dists = append(dists, pyindex.Dist{Project: w.name, Filename: fn, Data: data})
	}
	return pyindex.New(t, dists...)
}

// exec with --require installs once from the index named, then runs
// offline; the environment is listed and removed by `envs`; an unknown
// package is a usage error naming it; a program that did not ask for the
// package does not have it.
func TestExecWithDependencies(t *testing.T) {
	forBackends(t, func(t *testing.T, backend string) {
		ix := birdIndex(t)
		data := t.TempDir()
		dir := t.TempDir()
		prog := filepath.Join(dir, "prog.py")
		if err := os.WriteFile(prog, []byte("import seabird, pandas\nprint(seabird.VALUE)\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		req := filepath.Join(dir, "requirements.txt")
		if err := os.WriteFile(req, []byte("# the birds\nseabird==1.0\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		base := []string{"exec", "--backend", backend, "--data-dir", data, "--index-url", ix.URL()}
		code, stdout, stderr := runBinary(t, dir, nil, append(base, "--requirements", req, prog)...)
		if code != 0 || strings.TrimSpace(stdout) != "42" || !strings.Contains(stderr, "installing seabird==1.0") {
			t.Fatalf("first exec: %d %q %q", code, stdout, stderr)
		}
		asked := ix.Requests()
		ix.Close()
		code, stdout, stderr = runBinary(t, dir, nil, append(base, "--require", "SeaBird == 1.0", prog)...)
		if code != 0 || strings.TrimSpace(stdout) != "42" || strings.Contains(stderr, "installing") || ix.Requests() != asked {
			t.Fatalf("second exec, index gone: %d %q %q", code, stdout, stderr)
		}
		code, _, stderr = runBinary(t, dir, nil, "exec", "--backend", backend, "--data-dir", data, prog)
		if code != 1 || !strings.Contains(stderr, "ModuleNotFoundError") {
			t.Errorf("without dependencies: %d %q", code, stderr)
		}

		code, stdout, _ = runBinary(t, dir, nil, "envs", "list", "--json", "--data-dir", data)
		var envs []struct {
			Key      string `json:"key"`
			Packages []struct{ Name, Version string }
		}
		if err := json.Unmarshal([]byte(stdout), &envs); code != 0 || err != nil || len(envs) != 1 || len(envs[0].Packages) != 2 {
			t.Fatalf("envs list: %d %q %v", code, stdout, err)
		}
		if code, _, stderr = runBinary(t, dir, nil, "envs", "rm", "--data-dir", data, envs[0].Key[:8]); code != 0 {
			t.Errorf("envs rm: %d %q", code, stderr)
		}
		if code, stdout, _ = runBinary(t, dir, nil, "envs", "list", "--json", "--data-dir", data); strings.TrimSpace(stdout) != "[]" {
			t.Errorf("after rm: %d %q", code, stdout)
		}

		ix2 := birdIndex(t)
		code, _, stderr = runBinary(t, dir, nil, "exec", "--backend", backend, "--data-dir", data, "--index-url", ix2.URL(),
			"--require", "albatross==2.0", prog)
		if code != 2 || !strings.Contains(stderr, "albatross") {
			t.Errorf("unknown package: %d %q", code, stderr)
		}
		for _, bad := range [][]string{
			{"--require", "seabird @ https://evil.example/seabird.whl"},
			{"--require", "--index-url=http://evil.example/simple"},
			{"--index-url", ix2.URL()},
		} {
			args := append([]string{"exec", "--backend", backend, "--data-dir", data}, bad...)
			if code, _, stderr = runBinary(t, dir, nil, append(args, prog)...); code != 2 {
				t.Errorf("%v: %d %q, want a usage error", bad, code, stderr)
			}
		}
	})
}

// A run in a folder with a requirements.txt installs it, tells the model
// what is installed, gives every program the packages, and audits the
// install.
func TestRunUsesTheFolderRequirements(t *testing.T) {
	ix := birdIndex(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "requirements.txt"), []byte("seabird==1.0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	srv, flags := modelServer(t, pyAnswer("import seabird\nprint(seabird.VALUE)\n"))
	code, stdout, stderr := runBinary(t, dir, nil, append(append([]string{"run", "--data-dir", data, "--index-url", ix.URL()}, flags...),
		"--no-verify", "Print the seabird value")...)
	if code != 0 || !strings.Contains(stdout, "42") || !strings.Contains(stderr, "installing seabird==1.0") {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	if req := srv.Requests()[0].Text(); !strings.Contains(req, "installed for this task: seabird 1.0, gull 0.7") {
		t.Errorf("the model is not told what is installed:\n%s", req)
	}
	code, stdout, _ = runBinary(t, "", nil, "log", "--data-dir", data)
	if code != 0 || !strings.Contains(stdout, "dependencies") || !strings.Contains(stdout, "seabird") {
		t.Errorf("the audit log lacks the install:\n%s", stdout)
	}
	// A requirements.txt codeagent does not install is named and left
	// out; the run goes on.
	if err := os.WriteFile(filepath.Join(dir, "requirements.txt"), []byte("-e git+https://evil.example/x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, flags = modelServer(t, pyAnswer("print('plain')\n"))
	code, stdout, stderr = runBinary(t, dir, nil, append(append([]string{"run", "--data-dir", data}, flags...),
		"--no-verify", "Print plain")...)
	if code != 0 || !strings.Contains(stderr, "requirements.txt: line 1") {
		t.Errorf("a requirements.txt not installed: exit %d\n%s%s", code, stdout, stderr)
	}
}

// The agent's path: a program imports a package nobody declared; the
// feedback says it may be declared; the next answer declares it and
// succeeds. A package the manifest does not allow is refused, and the
// refusal reaches the model.
func TestRunProgramDeclaresItsRequirements(t *testing.T) {
	ix := birdIndex(t)
	importing := "import seabird\nprint(seabird.VALUE)\n"
	declaring := "# requirements: seabird==1.0\n" + importing
	for _, c := range []struct {
		name, allow string
		ok          bool
		feedback    string
	}{
		{"allowed", "[seabird]", true, "`# requirements: NAME==VERSION, OTHER`"},
		{"not allowed", "[gull]", false, "seabird may not be installed here"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir, data := t.TempDir(), t.TempDir()
			man := filepath.Join(t.TempDir(), "codeagent.yaml")
			yaml := "agent:\n  tools:\n    - name: execute_python\n  permissions:\n    install: " + c.allow + "\n  dependencies:\n    index_url: " + ix.URL() + "\n"
			if err := os.WriteFile(man, []byte(yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			srv, flags := modelServer(t, pyAnswer(importing), pyAnswer(declaring), pyAnswer(declaring))
			code, stdout, stderr := runBinary(t, dir, nil, append(append([]string{"run", "--data-dir", data, "--manifest", man,
				"--max-iterations", "3", "--mode", "program"}, flags...), "--no-verify", "Print the seabird value")...)
			reqs := srv.Requests()
			if len(reqs) < 2 {
				t.Fatalf("exit %d, %d model requests\n%s%s", code, len(reqs), stdout, stderr)
			}
			if first := reqs[0].Text(); !strings.Contains(first, "may be installed: "+strings.Trim(c.allow, "[]")) {
				t.Errorf("the model is not told what may be installed:\n%s", first[:min(len(first), 1500)])
			}
			if second := reqs[1].Text(); !strings.Contains(second, "ModuleNotFoundError") || !strings.Contains(second, "`# requirements: NAME==VERSION, OTHER`") {
				t.Errorf("the feedback does not say a package may be declared:\n%s", second)
			}
			if c.ok {
				if code != 0 || !strings.Contains(stdout, "42") || len(reqs) != 2 {
					t.Fatalf("exit %d, %d model requests\n%s%s", code, len(reqs), stdout, stderr)
				}
				_, logOut, _ := runBinary(t, "", nil, "log", "--data-dir", data)
				if !strings.Contains(logOut, "dependencies") {
					t.Errorf("the install is not audited:\n%s", logOut)
				}
				return
			}
			if code == 0 || len(reqs) != 3 || !strings.Contains(reqs[2].Text(), c.feedback) {
				t.Errorf("exit %d, %d requests; the refusal should reach the model\n%s", code, len(reqs), reqs[len(reqs)-1].Text())
			}
		})
	}
}

// Tool mode: install_packages is offered when the manifest allows
// installing; the kernel restarts with the packages and the replay in a
// fresh sandbox has them too.
func TestRunToolModeInstallsPackages(t *testing.T) {
	ix := birdIndex(t)
	man := filepath.Join(t.TempDir(), "codeagent.yaml")
	if err := os.WriteFile(man, []byte("agent:\n  tools:\n    - name: execute_python\n  permissions:\n    install: [seabird, gull]\n  dependencies:\n    index_url: "+ix.URL()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	srv, flags := modelServer(t,
		llmtest.Call(llmtest.ToolCall("install_packages", map[string]string{"packages": "albatross"})),
		llmtest.Call(llmtest.ToolCall("install_packages", map[string]string{"packages": "seabird==1.0"})),
		pyCallReply("import seabird\nprint('value', seabird.VALUE)\n"),
		llmtest.Say("The value is printed."),
		llmtest.Say(`{"task_complete": true, "missing": ""}`),
	)
	code, stdout, stderr := runBinary(t, "", nil, append(append([]string{"run", "--data-dir", t.TempDir(), "--manifest", man,
		"--mode", "tools", "--json"}, flags...), "print the seabird value")...)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	var res agent.Result
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatal(err)
	}
	h := res.History[0]
	if !res.Success || len(h.Steps) != 3 || !strings.Contains(h.Steps[0].Output, "albatross may not be installed here") ||
		!strings.Contains(h.Steps[1].Output, "seabird 1.0") || !strings.Contains(h.Steps[1].Output, "The kernel restarted") || h.Replay == nil || h.Replay.Status != "ok" {
		t.Fatalf("result %+v", res)
	}
	if first := srv.Requests()[0].Text(); !strings.Contains(first, "install_packages installs more (may be installed: seabird, gull)") {
		t.Errorf("the model is not told it may install:\n%s", first)
	}
}
