package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestUsageErrorsAreOneLine: a mistyped flag or a missing argument is one
// line saying what is wrong and one saying where the usage is (it was the
// message and some 60 lines of flags), exit 2; -h prints the command's
// usage, exit 0, for every command (log, stats, doctor and version once
// printed a bare "Usage of", sessions called -h an unknown command).
func TestUsageErrorsAreOneLine(t *testing.T) {
	for _, args := range [][]string{
		{"run", "--bogus", "task"}, {"exec", "--bogus", "x.py"}, {"serve", "--bogus"}, {"log", "--bogus"},
		{"exec"}, {"check"}, {"run"}, {"sessions"}, {"repl", "extra"}, {"mcp", "extra"}, {"version", "extra"},
		{"doctor", "--backend", "bogus"}, {"exec", "x.py", "a"},
		{"changes", "rm"}, {"changes", "prune", "20200101-000000-abcdef"}, {"changes", "diff", "--force", "x", "20200101-000000-abcdef"},
		{"changes", "list", "--older-than", "7d"}, {"changes", "apply"},
	} {
		code, out, errOut := runCLI(t, "", args...)
		lines := strings.Split(strings.TrimRight(errOut, "\n"), "\n")
		if code != exitUsage || len(lines) != 2 || !strings.Contains(lines[1], "see 'codeagent "+args[0]+" -h'") || out != "" {
			t.Errorf("%v: exit %d, want 2 and two lines:\n%s", args, code, errOut)
		}
	}
	for _, c := range []string{"exec", "run", "repl", "doctor", "check", "sessions", "changes", "log", "stats", "eval", "mcp", "serve", "version"} {
		code, _, errOut := runCLI(t, "", c, "-h")
		if code != exitOK || !strings.HasPrefix(errOut, "usage: codeagent "+c) {
			t.Errorf("%s -h: exit %d:\n%s", c, code, errOut)
		}
		if m := regexp.MustCompile(`\(default [^)]*\) \(default`).FindString(errOut); m != "" {
			t.Errorf("%s -h says a default twice: %s", c, m)
		}
	}
}

// TestExecPassesArguments: `exec PROG -- ARGS` hands ARGS to the program
// as they are, spaces and dashes included.
func TestExecPassesArguments(t *testing.T) {
	prog := writeProgram(t, "args.py", "import sys\nprint(sys.argv[1:])\n")
	code, out, errOut := runCLI(t, "", "exec", "--workdir", t.TempDir(), prog, "--", "a", "b c", "--json")
	if code != 0 || strings.TrimSpace(out) != "['a', 'b c', '--json']" {
		t.Fatalf("exit %d, out %q, err %s", code, out, errOut)
	}
}

// TestLogOfAnUnknownSession: `log --session` of a session that does not
// exist says so, exit 2, as stats does (it printed an empty table, exit 0).
func TestLogOfAnUnknownSession(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []string{"log", "stats"} {
		code, _, errOut := runCLI(t, "", c, "--data-dir", dir, "--session", "nosuch")
		if code != exitUsage || !strings.Contains(errOut, `"nosuch": not found`) {
			t.Errorf("%s --session nosuch: exit %d: %s", c, code, errOut)
		}
	}
}

// TestVersionSaysTheBuild: version names the build (the module version or
// "(devel)", with the revision when the build recorded it), not "dev".
func TestVersionSaysTheBuild(t *testing.T) {
	code, out, _ := runCLI(t, "", "version")
	if code != 0 || !regexp.MustCompile(`^codeagent (\(devel\)|v\S+)`).MatchString(out) {
		t.Fatalf("version: exit %d, %q", code, out)
	}
	old := version
	version = "v9.8.7"
	defer func() { version = old }()
	if _, out, _ := runCLI(t, "", "version"); !strings.HasPrefix(out, "codeagent v9.8.7") {
		t.Errorf("a link-time version is not said: %q", out)
	}
}

// TestSecondServeOnADataDirectory: a second serve on a data directory in
// use exits 75 naming the first's address, and the first keeps its token
// (the second once replaced the token file, then deleted it at exit, so
// the documented curl $(cat serve-token) got 401 from the first).
func TestSecondServeOnADataDirectory(t *testing.T) {
	dir := t.TempDir()
	base, _, _ := startServe(t, "--data-dir", dir)
	tokenFile := filepath.Join(dir, tokenFileName)
	token, err := os.ReadFile(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runCLI(t, "", "serve", "--addr", "127.0.0.1:0", "--warm", "0", "--data-dir", dir)
	if code != exitBusy || !strings.Contains(errOut, base) {
		t.Fatalf("second serve: exit %d, want 75 naming %s: %s", code, base, errOut)
	}
	if now, err := os.ReadFile(tokenFile); err != nil || string(now) != string(token) {
		t.Fatalf("the first server's token file: %q, %v", now, err)
	}
	if st, body, _ := call(t, "GET", base+"/v1/sessions", "", "Authorization", "Bearer "+strings.TrimSpace(string(token))); st != 200 {
		t.Fatalf("the first server with its token: %d %s", st, body)
	}
}

// TestSessionFileAgain: `run --session S --file sales.csv` a second time
// works (it exited 2, "already in the workspace"): the same file is kept,
// a changed one replaces the session's copy, and each is said.
func TestSessionFileAgain(t *testing.T) {
	data := t.TempDir()
	read := pyAnswer("print(open('sales.csv').read().strip())\n")
	_, flags := modelServer(t, read, read, read)
	src := filepath.Join(t.TempDir(), "sales.csv")
	base := append([]string{"run", "--data-dir", data, "--session", "s", "--no-verify", "--file", src}, flags...)
	for i, c := range []struct{ data, said, out string }{
		{"v1", "", "v1"}, {"v1", "is the same, kept", "v1"}, {"v2", "replaced the session's sales.csv", "v2"},
	} {
		if err := os.WriteFile(src, []byte(c.data), 0o644); err != nil {
			t.Fatal(err)
		}
		code, out, errOut := runCLI(t, "", append(base, "print the file")...)
		if code != 0 || !strings.Contains(errOut, c.said) || !strings.Contains(out, c.out) {
			t.Fatalf("turn %d: exit %d, want %q said and %q printed\n%s\n%s", i+1, code, c.said, c.out, out, errOut)
		}
	}
}

// TestOutKeepsTheUsersFiles: `run --out DIR` never replaces a file already
// in DIR (it overwrote solution.py and report.txt without asking), says
// which it left and how to replace them; --force replaces them.
func TestOutKeepsTheUsersFiles(t *testing.T) {
	write := pyAnswer("open('report.txt', 'w').write('new report')\nprint('done')\n")
	_, flags := modelServer(t, write, write)
	out := t.TempDir()
	mine := filepath.Join(out, "report.txt")
	if err := os.WriteFile(mine, []byte("my report"), 0o644); err != nil {
		t.Fatal(err)
	}
	args := append(append([]string{"run"}, flags...), "--no-verify", "--out", out, "write the report")
	code, _, errOut := runCLI(t, "", args...)
	got, _ := os.ReadFile(mine)
	if code != 0 || string(got) != "my report" || !strings.Contains(errOut, "--force") {
		t.Fatalf("without --force: exit %d, report.txt %q\n%s", code, got, errOut)
	}
	if _, err := os.Stat(filepath.Join(out, "solution.py")); err != nil {
		t.Errorf("the program, a new file, was not copied: %v", err)
	}
	args = append(append([]string{"run"}, flags...), "--no-verify", "--force", "--out", out, "write the report")
	if code, _, errOut = runCLI(t, "", args...); code != 0 {
		t.Fatalf("with --force: exit %d\n%s", code, errOut)
	}
	if got, _ = os.ReadFile(mine); string(got) != "new report" {
		t.Fatalf("with --force, report.txt is %q", got)
	}
}

// TestDoctorDocker: doctor --backend docker reports the engine, the image
// and a program run in a container (it said nothing of them, exit 0); an
// image that is not there is a failure naming it.
func TestDoctorDocker(t *testing.T) {
	dockerOrSkip(t)
	code, out, errOut := runCLI(t, "", "doctor", "--backend", "docker")
	if code != 0 || !strings.Contains(out, "image:             codeagent-sandbox:latest") || !strings.Contains(out, "a program:         ok") {
		t.Fatalf("doctor --backend docker: exit %d\n%s%s", code, out, errOut)
	}
	code, out, _ = runCLI(t, "", "doctor", "--backend", "docker", "--image", "codeagent-no-such-image:none")
	if code != exitFailure || !strings.Contains(out, "FAIL") || !strings.Contains(out, "codeagent-no-such-image:none not found") {
		t.Fatalf("doctor with a missing image: exit %d\n%s", code, out)
	}
}

// Every command's -h says what it does, its flags, examples that use only
// flags it has (shown or listed by codeagent help backends), and its exit
// statuses.
func TestEveryHelpHasExamplesAndExitStatuses(t *testing.T) {
	flagRE := regexp.MustCompile(`--[a-z][a-z-]*`)
	for _, c := range commands() {
		code, stdout, stderr := runCLI(t, "", c.name, "-h")
		help := stdout + stderr
		if code != 0 || !strings.Contains(help, "usage: codeagent "+c.name) || !strings.Contains(help, "\nexamples:\n  codeagent "+c.name) ||
			!strings.Contains(help, "Exit status") {
			t.Errorf("%s -h: exit %d\n%s", c.name, code, help)
			continue
		}
		examples := help[strings.Index(help, "\nexamples:\n"):]
		fs := flagsOf(c)
		for _, f := range flagRE.FindAllString(examples, -1) {
			if fs.Lookup(f[2:]) == nil {
				t.Errorf("%s -h: an example uses %s, which is not among its flags", c.name, f)
			}
		}
	}
}
