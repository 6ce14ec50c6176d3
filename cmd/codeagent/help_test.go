package main

import (
	"flag"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// Most lines and columns of a command's -h: it fits a screen.
const (
	helpMaxLines = 60
	helpMaxWidth = 120
)

// TestEveryHelpFitsAScreen: every command's -h is at most 60 lines of at
// most 120 columns (run -h was 132 lines, serve 99, eval 87), the same as
// `codeagent help COMMAND`; each flag a command registers is in its -h or
// in the help topic that -h names (so a new flag cannot vanish from both),
// and every flag a topic lists is registered by some command and left out
// of every -h.
func TestEveryHelpFitsAScreen(t *testing.T) {
	topics := map[string]string{}
	for name := range helpTopics {
		code, out, errOut := runCLI(t, "", "help", name)
		if code != exitOK || out != "" || !strings.HasPrefix(errOut, "usage: codeagent help "+name) {
			t.Fatalf("help %s: exit %d, %q", name, code, errOut)
		}
		checkWidth(t, "help "+name, errOut)
		topics[name] = errOut
	}
	listed := map[string]bool{}
	for _, c := range commands() {
		code, out, help := runCLI(t, "", c.name, "-h")
		if code != exitOK || out != "" || !strings.HasPrefix(help, "usage: codeagent "+c.name) {
			t.Errorf("%s -h: exit %d, %q", c.name, code, help)
			continue
		}
		if n := strings.Count(help, "\n"); n > helpMaxLines {
			t.Errorf("%s -h is %d lines, more than %d", c.name, n, helpMaxLines)
		}
		checkWidth(t, c.name+" -h", help)
		if code, _, byHelp := runCLI(t, "", "help", c.name); code != exitOK || byHelp != help {
			t.Errorf("help %s: exit %d, differs from %s -h:\n%s", c.name, code, c.name, byHelp)
		}
		fs := flagsOf(c)
		if fs == nil {
			t.Fatalf("%s: no flag set", c.name)
		}
		for _, n := range commonFlags[c.name] {
			if fs.Lookup(n) == nil {
				t.Errorf("%s: commonFlags names --%s, which it does not take", c.name, n)
			}
		}
		for _, f := range flagsIn(fs) {
			shown := regexp.MustCompile(`(?m)^  --?` + regexp.QuoteMeta(f) + `( |$)`).MatchString(help)
			topic := hiddenTopic(f)
			switch {
			case topic == "" && !shown:
				t.Errorf("%s -h leaves out --%s, which no help topic lists", c.name, f)
			case topic != "" && shown:
				t.Errorf("%s -h shows --%s, which help %s lists", c.name, f, topic)
			case topic != "":
				listed[f] = true
				if !strings.Contains(help, "codeagent help "+topic) {
					t.Errorf("%s -h leaves out --%s and does not say where it is (codeagent help %s)", c.name, f, topic)
				}
				if !regexp.MustCompile(`(?m)^  --` + regexp.QuoteMeta(f) + `( |$)`).MatchString(topics[topic]) {
					t.Errorf("help %s does not document --%s of %s", topic, f, c.name)
				}
			}
		}
	}
	for name, topic := range helpTopics {
		for _, s := range topic.sections {
			for _, f := range s.flags {
				if !listed[f] {
					t.Errorf("help %s lists --%s, which no command takes", name, f)
				}
			}
		}
	}
}

// flagsIn are the names of the flags fs registers.
func flagsIn(fs *flag.FlagSet) []string {
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	return names
}

func checkWidth(t *testing.T, what, text string) {
	t.Helper()
	for _, l := range strings.Split(text, "\n") {
		if utf8.RuneCountInString(l) > helpMaxWidth {
			t.Errorf("%s: a line of %d columns, more than %d:\n%s", what, utf8.RuneCountInString(l), helpMaxWidth, l)
		}
	}
}

// TestHiddenFlagsStillWork: the flags -h leaves out are taken as before:
// exec runs with backend, package-source and network settings given, and
// a bad value of one is still a usage error naming it.
func TestHiddenFlagsStillWork(t *testing.T) {
	ix := birdIndex(t)
	prog := writeProgram(t, "uses_gull.py", "import gull\nprint(gull.TWO)\n")
	code, out, errOut := runCLI(t, "", "exec", "--backend", "namespace", "--image", "other:latest", "--kubeconfig", "/nonexistent",
		"--index-url", ix.URL(), "--require", "gull==0.7", "--data-dir", t.TempDir(), "--workdir", t.TempDir(), prog)
	if code != 0 || strings.TrimSpace(out) != "2" {
		t.Fatalf("exec with hidden flags: exit %d, %q, %s", code, out, errOut)
	}
	code, _, errOut = runCLI(t, "", "serve", "--kernel-memory", "1KiB")
	if code != exitUsage || !strings.Contains(errOut, "-kernel-memory") {
		t.Errorf("serve --kernel-memory 1KiB: exit %d, %s", code, errOut)
	}
}

// TestTopLevelHelp: `codeagent help` and -h list every command and the
// help topics, exit 0; each verb a command's summary names exists (the
// summary of changes named show, which does not); `help` of something
// unknown is a usage error.
func TestTopLevelHelp(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"-h"}, {"--help"}, {"help", "-h"}} {
		code, out, errOut := runCLI(t, "", args...)
		if code != exitOK || out != "" || !strings.Contains(errOut, "help topics:\n  backends ") {
			t.Errorf("%v: exit %d, %q", args, code, errOut)
		}
		for _, c := range commands() {
			if !strings.Contains(errOut, "\n  "+c.name+" ") {
				t.Errorf("%v does not list %s", args, c.name)
			}
		}
		checkWidth(t, strings.Join(args, " "), errOut)
	}
	data := t.TempDir()
	verbs := map[string]string{"list": "list", "show": "show", "diff": "diff", "apply": "apply", "remove": "rm", "prune": "prune"}
	for _, c := range commands() {
		words := regexp.MustCompile(`[a-z]+`).FindAllString(c.summary, -1)
		for _, w := range words {
			verb, ok := verbs[w]
			if !ok || !slices.Contains([]string{"sessions", "changes", "envs"}, c.name) {
				continue
			}
			_, _, errOut := runCLI(t, "", c.name, verb, "nosuch", "--data-dir", data)
			if strings.Contains(errOut, "unknown "+c.name+" command") {
				t.Errorf("the summary of %s names %q, which %s does not take: %s", c.name, w, c.name, errOut)
			}
		}
	}
	for _, args := range [][]string{{"help", "nosuch"}, {"help", "run", "exec"}} {
		if code, _, errOut := runCLI(t, "", args...); code != exitUsage || !strings.Contains(errOut, "see 'codeagent help'") {
			t.Errorf("%v: exit %d, %q", args, code, errOut)
		}
	}
}

// TestHelpBackendsPage: docs/CLI.md holds the output of `codeagent help
// backends` as it is.
func TestHelpBackendsPage(t *testing.T) {
	page, err := os.ReadFile("../../docs/CLI.md")
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(page), "```text\n")
	block, _, ok2 := strings.Cut(block, "```\n")
	_, _, help := runCLI(t, "", "help", "backends")
	if !ok || !ok2 || block != help {
		t.Errorf("docs/CLI.md's copy of codeagent help backends differs from it (put the output of\n"+
			"go run ./cmd/codeagent help backends 2>&1 in its text block); it is:\n%s", help)
	}
}
