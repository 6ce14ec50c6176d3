package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/codeagent/codeagent/llm/llmtest"
)

// The checker stops what is dangerous, not what is common: attacks
// spelt to slip past it are refused through the real binary, and the
// programs everyone writes pass.

// goEnvironRead reads the parent's environment through a path folded from
// a sum; goSignal signals the parent through a Process it builds.
const (
	goEnvironRead = "package main\n\nimport (\n\t\"fmt\"\n\t\"os\"\n)\n\n" +
		"func main() {\n\tb, _ := os.ReadFile(\"/pr\" + \"oc/self/environ\")\n\tfmt.Println(\"LEAKED\", len(b))\n}\n"
	goSignal = "package main\n\nimport (\n\t\"fmt\"\n\t\"os\"\n)\n\n" +
		"func main() {\n\terr := (&os.Process{Pid: os.Getppid()}).Signal(os.Interrupt)\n\tfmt.Println(\"SIGNALLED\", err)\n}\n"
)

// runAttempt is an attempt of run --json as the tests read it.
type runAttempt struct {
	Check []struct {
		Rule string `json:"rule"`
		Kind string `json:"kind"`
	} `json:"check"`
	Result *struct {
		Stdout string `json:"stdout"`
	} `json:"result"`
}

// runJSON runs "codeagent run --json" with a scripted model in dir and
// returns its result.
func runJSON(t *testing.T, dir string, replies []llmtest.Reply, args ...string) (int, struct {
	Success bool         `json:"success"`
	Output  string       `json:"output"`
	History []runAttempt `json:"history"`
}, string) {
	t.Helper()
	_, flags := modelServer(t, replies...)
	all := append(append(append([]string{"run", "--json", "--no-verify"}, flags...), args...), "do the task")
	code, stdout, stderr := runBinary(t, dir, nil, all...)
	var res struct {
		Success bool         `json:"success"`
		Output  string       `json:"output"`
		History []runAttempt `json:"history"`
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("run --json: exit %d, %v\n%s\n%s", code, err, stdout, stderr)
	}
	return code, res, stderr
}

// rules lists an attempt's safety findings' rules.
func (a runAttempt) rules() []string {
	var out []string
	for _, f := range a.Check {
		if f.Kind == "" {
			out = append(out, f.Rule)
		}
	}
	return out
}

// TestGoSpellingsAreRefused: a Go program reading /proc/self/environ
// through a path folded from a sum, and one signalling its parent through
// an os.Process it builds, are refused by check and never run in a run.
func TestGoSpellingsAreRefused(t *testing.T) {
	dir := t.TempDir()
	for name, code := range map[string]string{"environ.go": goEnvironRead, "signal.go": goSignal} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(code), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for name, rule := range map[string]string{"environ.go": "path-outside-workspace", "signal.go": "forbidden-function"} {
		code, stdout, stderr := runBinary(t, dir, nil, "check", name)
		if code != 1 || !strings.Contains(stdout, rule) {
			t.Errorf("check %s: exit %d, want 1 with %s\n%s%s", name, code, rule, stdout, stderr)
		}
	}
	code, res, stderr := runJSON(t, t.TempDir(), []llmtest.Reply{
		llmtest.Say("```go\n" + goEnvironRead + "```"), llmtest.Say("```go\n" + goSignal + "```"),
		llmtest.Say("```go\n" + goProgram + "```")}, "--lang", "go")
	if code != 0 || !res.Success || len(res.History) != 3 || strings.TrimSpace(res.Output) != "42" {
		t.Fatalf("exit %d, success %v, %d attempts, output %q\n%s", code, res.Success, len(res.History), res.Output, stderr)
	}
	for i, want := range []string{"path-outside-workspace", "forbidden-function"} {
		a := res.History[i]
		if !strings.Contains(strings.Join(a.rules(), " "), want) || a.Result != nil {
			t.Errorf("attempt %d: findings %v, ran: %v; want %s and no run", i+1, a.rules(), a.Result != nil, want)
		}
	}
}

// everydayPython reads the CSV files of a folder with os.path.join over
// os.listdir, takes its arguments from sys.argv and ends with sys.exit:
// a new user's first data script.
const everydayPython = `import os
import sys
import csv


def main():
    folder = sys.argv[1] if len(sys.argv) > 1 else "data"
    if not os.path.isdir(folder):
        print(f"no folder {folder}", file=sys.stderr)
        sys.exit(2)
    total = 0
    for name in sorted(os.listdir(folder)):
        if name.endswith(".csv"):
            with open(os.path.join(folder, name), newline="") as f:
                total += sum(int(row["units"]) for row in csv.DictReader(f))
    os.makedirs("out", exist_ok=True)
    with open(os.path.join("out", "total.txt"), "w") as f:
        f.write(str(total))
    print("units:", total, "home set:", bool(os.environ.get("HOME")))
    sys.exit(0)


if __name__ == "__main__":
    main()
`

// TestEverydayProgramsPassCheck: the programs a data user writes (os and
// sys for paths, listings, arguments and exit in Python; fs and path in
// node; a bash script) pass codeagent check, while os.system and the
// spellings that would hide it, and child_process, are refused.
func TestEverydayProgramsPassCheck(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"sum.py": everydayPython,
		"args.py": "import sys\n\nif len(sys.argv) < 2:\n    sys.exit('usage: args.py NAME')\n" +
			"for line in sys.stdin:\n    sys.stdout.write(sys.argv[1] + ': ' + line)\n",
		"sum.js": "const fs = require('fs');\nconst path = require('path');\nlet n = 0;\n" +
			"for (const f of fs.readdirSync('data')) {\n  if (f.endsWith('.csv')) n += fs.readFileSync(path.join('data', f), 'utf8').split('\\n').length;\n}\n" +
			"console.log(n, process.argv.slice(2), process.env.HOME);\nprocess.exit(0);\n",
		"sum.sh": "set -eu\nmkdir -p out\nfor f in data/*.csv; do\n  tail -n +2 \"$f\" >> out/all.csv\ndone\nwc -l out/all.csv\nexit 0\n",
	}
	refused := map[string]string{
		"system.py":    "import os\nos.system('id')\n",
		"alias.py":     "import os as o\no.system('id')\n",
		"value.py":     "import os\nrun = os\nrun.system('id')\n",
		"getattr.py":   "import os\ngetattr(os, 'sys' + 'tem')('id')\n",
		"dunder.py":    "__import__('os').system('id')\n",
		"import.py":    "import importlib\nimportlib.import_module('os').system('id')\n",
		"environ.py":   "import os\nprint(dict(os.environ))\n",
		"kill.py":      "import os\nos.kill(os.getppid(), 9)\n",
		"process.js":   "const cp = require('child_process');\ncp.execSync('id');\n",
		"privilege.sh": "unshare -r id\n",
	}
	for name, code := range files {
		writeCheckFile(t, dir, name, code)
	}
	for name, code := range refused {
		writeCheckFile(t, dir, name, code)
	}
	for name := range files {
		if code, stdout, stderr := runBinary(t, dir, nil, "check", name); code != 0 || stdout != "" {
			t.Errorf("check %s: exit %d, want 0 and no findings\n%s%s", name, code, stdout, stderr)
		}
	}
	for name := range refused {
		if code, stdout, stderr := runBinary(t, dir, nil, "check", name); code != 1 || !strings.Contains(stdout, name+":") {
			t.Errorf("check %s: exit %d, want 1 with a finding\n%s%s", name, code, stdout, stderr)
		}
	}
}

// TestEverydayProgramRuns: in a run, the everyday program passes the
// check and runs on the folder's files; a model's os.system is refused
// and never runs.
func TestEverydayProgramRuns(t *testing.T) {
	dir := t.TempDir()
	for rel, data := range map[string]string{"data/a.csv": "day,units\n1,3\n2,4\n", "data/b.csv": "day,units\n3,5\n"} {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	system := "import os\n\nos.system('echo RAN > ran.txt')\nprint('RAN')\n"
	code, res, stderr := runJSON(t, dir, []llmtest.Reply{pyAnswer(system), pyAnswer(everydayPython)})
	if code != 0 || !res.Success || len(res.History) != 2 || !strings.Contains(res.Output, "units: 12 home set: True") {
		t.Fatalf("exit %d, success %v, %d attempts, output %q\n%s", code, res.Success, len(res.History), res.Output, stderr)
	}
	if a := res.History[0]; !strings.Contains(strings.Join(a.rules(), " "), "forbidden-function") || a.Result != nil {
		t.Errorf("attempt 1 (os.system): findings %v, ran: %v", a.rules(), a.Result != nil)
	}
	if a := res.History[1]; len(a.rules()) != 0 {
		t.Errorf("attempt 2 (the everyday program): findings %v", a.rules())
	}
	if _, err := os.Stat(filepath.Join(dir, "ran.txt")); err == nil {
		t.Error("the refused program ran")
	}
}
