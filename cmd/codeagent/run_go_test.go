package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/codeagent/codeagent/llm/llmtest"
)

// goProgram is a Go program that prints 6*7.
const goProgram = "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(6 * 7) }\n"

// TestExecGo: a .go file (or --lang go) runs with go run in the sandbox
// and prints its output.
func TestExecGo(t *testing.T) {
	dir := t.TempDir()
	for name, data := range map[string]string{"main.go": goProgram, "prog.txt": goProgram} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"exec", "main.go"}, {"exec", "--lang", "go", "prog.txt"}} {
		code, stdout, stderr := runBinary(t, dir, nil, args...)
		if code != 0 || stdout != "42\n" {
			t.Errorf("codeagent %v: exit %d, stdout %q\n%s", args, code, stdout, stderr)
		}
	}
}

// TestCheckGo: `codeagent check` refuses a Go program that imports
// os/exec, under an alias too, and passes an ordinary one.
func TestCheckGo(t *testing.T) {
	dir := t.TempDir()
	bad := "package main\n\nimport run \"os/exec\"\n\nfunc main() { run.Command(\"id\").Run() }\n"
	for name, data := range map[string]string{"bad.go": bad, "main.go": goProgram} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	code, stdout, stderr := runBinary(t, dir, nil, "check", "bad.go")
	if code != 1 || !strings.Contains(stdout, "forbidden-import") || !strings.Contains(stdout, "os/exec") {
		t.Errorf("check bad.go: exit %d, want 1 with forbidden-import os/exec\n%s%s", code, stdout, stderr)
	}
	if code, stdout, stderr := runBinary(t, dir, nil, "check", "main.go"); code != 0 {
		t.Errorf("check main.go: exit %d\n%s%s", code, stdout, stderr)
	}
}

// TestRunGoKeepsItsBuildCache: a Go run in a folder keeps Go's build cache
// between its executions (the second program finds the first one's), and
// the cache is neither among the run's changes to the folder (the program
// and what it wrote) nor in the folder.
func TestRunGoKeepsItsBuildCache(t *testing.T) {
	dir := userFolder(t)
	before := treeLook(t, dir)
	first := "```go\npackage main\n\nimport \"os\"\n\nfunc main() { os.Exit(3) }\n```"
	second := "```go\npackage main\n\nimport (\n\t\"fmt\"\n\t\"os\"\n)\n\nfunc main() {\n" +
		"\t_, err := os.Stat(\".codeagent-cache/go-build\")\n" +
		"\tos.WriteFile(\"report.txt\", []byte(\"done\\n\"), 0o644)\n" +
		"\tfmt.Println(6*7, \"cached:\", err == nil)\n}\n```"
	_, flags := modelServer(t, llmtest.Say(first), llmtest.Say(second))
	code, stdout, stderr := runBinary(t, dir, nil, append(append([]string{"run", "--data-dir", t.TempDir(), "--json"}, flags...),
		"--no-verify", "write a Go program that prints 6*7 and writes report.txt")...)
	var res struct {
		Success  bool
		Language string
		Output   string
		Folder   struct{ Changes []struct{ Path, Kind string } }
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || code != exitOK {
		t.Fatalf("exit %d, %v\nstdout %s\nstderr %s", code, err, stdout, stderr)
	}
	if !res.Success || res.Language != "go" || strings.TrimSpace(res.Output) != "42 cached: true" {
		t.Fatalf("success %v, language %q, output %q; want go and \"42 cached: true\"", res.Success, res.Language, res.Output)
	}
	if len(res.Folder.Changes) != 1 || res.Folder.Changes[0].Path != "report.txt" {
		t.Errorf("changes %+v, want report.txt alone (the program is codeagent's)", res.Folder.Changes)
	}
	if after := treeLook(t, dir); after != before {
		t.Errorf("the folder changed:\nbefore:\n%safter:\n%s", before, after)
	}
}
