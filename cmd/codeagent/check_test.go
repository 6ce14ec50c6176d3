package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// runCheckCLI runs "codeagent check ARGS" in-process.
func runCheckCLI(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	code := run(ctx, append([]string{"check"}, args...), stdio{in: strings.NewReader(stdin), out: &out, err: &errb})
	return code, out.String(), errb.String()
}

func writeCheckFile(t *testing.T, dir, name, code string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(code), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCheckClean(t *testing.T) {
	dir := t.TempDir()
	py := writeCheckFile(t, dir, "ok.py", "import pandas as pd\nimport torch\ndf = pd.read_csv('in.csv')\nmodel = torch.nn.Linear(2, 1)\nmodel.eval()\n")
	js := writeCheckFile(t, dir, "ok.mjs", "import fs from 'fs';\nconsole.log(fs.readFileSync('a.txt', 'utf8'));\n")
	sh := writeCheckFile(t, dir, "ok.sh", "sort data.txt > out.txt\n")
	code, out, errOut := runCheckCLI(t, "", py, js, sh)
	if code != exitOK || out != "" {
		t.Fatalf("code %d out %q err %q", code, out, errOut)
	}
}

func TestCheckFindingsText(t *testing.T) {
	dir := t.TempDir()
	py := writeCheckFile(t, dir, "bad.py", "import subprocess\nx = eval('1')\n")
	code, out, _ := runCheckCLI(t, "", py)
	if code != exitFailure {
		t.Fatalf("code %d, want %d", code, exitFailure)
	}
	for _, want := range []string{
		py + ":1:8 forbidden-import module subprocess is forbidden",
		py + ":2:5 forbidden-builtin calls the forbidden builtin eval",
		"    hint: ",
		"    code: eval",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestCheckJSON(t *testing.T) {
	dir := t.TempDir()
	good := writeCheckFile(t, dir, "good.py", "print(1)\n")
	bad := writeCheckFile(t, dir, "bad.sh", "curl http://x\n")
	syntax := writeCheckFile(t, dir, "syntax.py", "def f(:\n")
	code, out, _ := runCheckCLI(t, "", "--json", good, bad, syntax)
	if code != exitFailure {
		t.Fatalf("code %d", code)
	}
	var res struct {
		Files []struct {
			File     string `json:"file"`
			Safe     bool   `json:"safe"`
			Findings []struct {
				Rule    string `json:"rule"`
				Line    int    `json:"line"`
				Column  int    `json:"column"`
				Text    string `json:"text"`
				Message string `json:"message"`
				Hint    string `json:"hint"`
			} `json:"findings"`
		} `json:"files"`
	}
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&res); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(res.Files) != 3 || !res.Files[0].Safe || res.Files[1].Safe || res.Files[2].Safe {
		t.Fatalf("%+v", res)
	}
	if res.Files[0].Findings == nil || len(res.Files[0].Findings) != 0 {
		t.Errorf("a clean file must have an empty findings array: %s", out)
	}
	f := res.Files[1].Findings[0]
	if f.Rule != "network-access" || f.Line != 1 || f.Column != 1 || f.Text != "curl" || f.Message == "" || f.Hint == "" {
		t.Errorf("finding %+v", f)
	}
	if res.Files[2].Findings[0].Rule != "syntax-error" {
		t.Errorf("syntax error: %+v", res.Files[2].Findings)
	}
}

func TestCheckUsageErrors(t *testing.T) {
	dir := t.TempDir()
	py := writeCheckFile(t, dir, "a.py", "print(1)\n")
	txt := writeCheckFile(t, dir, "a.txt", "print(1)\n")
	badPolicy := writeCheckFile(t, dir, "p.yaml", "mode: sometimes\n")
	unknownKey := writeCheckFile(t, dir, "q.yaml", "modes: deny\n")
	cases := []struct {
		args []string
		want string
	}{
		{nil, "check needs the files to check"},
		{[]string{filepath.Join(dir, "missing.py")}, "no such file"},
		{[]string{"--lang", "cobol", py}, "unknown language"},
		{[]string{txt}, "cannot tell the language"},
		{[]string{"--policy", badPolicy, py}, "mode"},
		{[]string{"--policy", unknownKey, py}, "modes"},
		{[]string{"--policy", filepath.Join(dir, "nope.yaml"), py}, "invalid policy"},
		{[]string{"--bogus", py}, "bogus"},
		{[]string{"-"}, "cannot tell the language"},
		{[]string{"--lang", "python", dir}, "not a regular file"},
	}
	for _, c := range cases {
		code, out, errOut := runCheckCLI(t, "", c.args...)
		if code != exitUsage || out != "" || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: code %d out %q err %q (want %q)", c.args, code, out, errOut, c.want)
		}
	}
}

func TestCheckLangAndStdin(t *testing.T) {
	code, out, _ := runCheckCLI(t, "exec('x')\n", "--lang", "python", "-")
	if code != exitFailure || !strings.Contains(out, "-:1:1 forbidden-builtin") {
		t.Fatalf("code %d out %q", code, out)
	}
	dir := t.TempDir()
	txt := writeCheckFile(t, dir, "script.txt", "wget x\n")
	if code, out, _ := runCheckCLI(t, "", "--lang", "bash", txt); code != exitFailure || !strings.Contains(out, "network-access") {
		t.Fatalf("code %d out %q", code, out)
	}
}

func TestCheckPolicyFile(t *testing.T) {
	dir := t.TempDir()
	py := writeCheckFile(t, dir, "a.py", "import json\nwhile True:\n    pass\n")
	if code, _, _ := runCheckCLI(t, "", py); code != exitFailure {
		t.Fatalf("default policy: code %d", code)
	}
	pol := writeCheckFile(t, dir, "p.yaml", "disable: [unbounded-loop]\n")
	if code, out, errOut := runCheckCLI(t, "", "--policy", pol, py); code != exitOK {
		t.Fatalf("with policy: code %d out %q err %q", code, out, errOut)
	}
	allow := writeCheckFile(t, dir, "allow.yaml", "mode: allow\npython:\n  allowed_modules: [math]\n")
	if code, out, _ := runCheckCLI(t, "", "--policy", allow, "--json", py); code != exitFailure || !strings.Contains(out, "import-not-allowed") {
		t.Fatalf("allow mode: code %d out %q", code, out)
	}
}

func TestCheckRegistered(t *testing.T) {
	var errb bytes.Buffer
	run(context.Background(), []string{"help"}, stdio{in: strings.NewReader(""), out: &bytes.Buffer{}, err: &errb})
	if !strings.Contains(errb.String(), "check") {
		t.Fatalf("help does not list check:\n%s", errb.String())
	}
}

// A file over the limit is a finding, read no further than the limit: a
// 1 GiB file costs no more than a 4 MiB one. --max-size raises the limit.
func TestCheckLargeFile(t *testing.T) {
	dir := t.TempDir()
	huge := filepath.Join(dir, "huge.py")
	f, err := os.Create(huge)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("x = 1\n")
	f.Truncate(1 << 30) // sparse: a NUL byte file of 1 GiB
	f.Close()
	start := time.Now()
	code, out, errOut := runCheckCLI(t, "", huge)
	if code != exitFailure || !strings.Contains(out, "input-too-large the input is too large to check: more than the checker's limit of 4 MiB") {
		t.Fatalf("code %d out %q err %q", code, out, errOut)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %v: the file was read on", d)
	}
	py := writeCheckFile(t, dir, "mid.py", strings.Repeat("total = compute(items, factor=3) + offset\n", 6<<20/42))
	if code, out, _ := runCheckCLI(t, "", py); code != exitFailure || !strings.Contains(out, "input-too-large") {
		t.Fatalf("6 MiB, default limit: code %d out %q", code, out)
	}
	if code, out, errOut := runCheckCLI(t, "", "--max-size", "8MiB", py); code != exitOK {
		t.Fatalf("6 MiB, --max-size 8MiB: code %d out %q err %q", code, out, errOut)
	}
	for _, bad := range []string{"0", "-1", "1TiB", "12"} {
		if code, _, errOut := runCheckCLI(t, "", "--max-size", bad, py); code != exitUsage || !strings.Contains(errOut, "flag -max-size") {
			t.Errorf("--max-size %s: code %d err %q", bad, code, errOut)
		}
	}
}
