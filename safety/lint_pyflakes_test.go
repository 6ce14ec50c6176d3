package safety

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// humanEvalFile opens the shared HumanEval data set, which lives next to the
// repository (humanEvalPath) or, for a worktree under wt/, one level up.
func humanEvalFile() (*os.File, error) {
	f, err := os.Open(humanEvalPath)
	if err != nil {
		if g, err2 := os.Open(filepath.Join("..", humanEvalPath)); err2 == nil {
			return g, nil
		}
	}
	return f, err
}

// humanEvalPrograms returns each task's prompt with its canonical solution.
func humanEvalPrograms(t testing.TB) []string {
	t.Helper()
	f, err := humanEvalFile()
	if err != nil {
		t.Skipf("HumanEval data not available: %v", err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var task struct {
			Prompt   string `json:"prompt"`
			Solution string `json:"canonical_solution"`
		}
		if err := json.Unmarshal(sc.Bytes(), &task); err != nil {
			t.Fatal(err)
		}
		out = append(out, task.Prompt+task.Solution)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// pyflakesLine is one pyflakes message of the two kinds compared.
var pyflakesLine = regexp.MustCompile(`^(.*):(\d+):\d+:? (undefined name '.*'|'.*' imported but unused)$`)

// TestLintAgreesWithPyflakes runs Debian's pyflakes (on the test corpus, in
// a temporary directory) and compares its undefined-name and unused-import
// messages with the checker's on the HumanEval prompts with their solutions
// and on the Python corpora of testdata: undefined names by line and text,
// unused imports by text (pyflakes gives a statement's first line, the
// checker the imported name's).
func TestLintAgreesWithPyflakes(t *testing.T) {
	if exec.Command("/usr/bin/python3", "-m", "pyflakes", "--version").Run() != nil {
		t.Skip("python3-pyflakes is not installed")
	}
	type program struct{ name, code string }
	var progs []program
	for i, p := range humanEvalPrograms(t) {
		progs = append(progs, program{fmt.Sprintf("humaneval_%03d.py", i), p})
	}
	for _, corpus := range []string{"testdata/clean/python.txt", "testdata/evasion/python.txt"} {
		for i, c := range readCorpus(t, corpus) {
			progs = append(progs, program{fmt.Sprintf("%s_%03d.py", filepath.Base(filepath.Dir(corpus)), i), c.Code})
		}
	}
	bench, err := readBenchFile()
	if err != nil {
		t.Fatal(err)
	}
	progs = append(progs, program{"bench_analysis.py", string(bench)})

	dir := t.TempDir()
	args := []string{"-m", "pyflakes"}
	for _, p := range progs {
		if err := os.WriteFile(filepath.Join(dir, p.name), []byte(p.code), 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, filepath.Join(dir, p.name))
	}
	out, _ := exec.Command("/usr/bin/python3", args...).CombinedOutput() // exit 1 when it reports
	theirs := map[string][]string{}
	broken := map[string]bool{} // files pyflakes cannot parse
	for _, line := range strings.Split(string(out), "\n") {
		if m := pyflakesLine.FindStringSubmatch(line); m != nil {
			name := filepath.Base(m[1])
			theirs[name] = append(theirs[name], lintKey(m[2], m[3]))
		} else if i := strings.Index(line, ".py:"); i >= 0 && !strings.Contains(line, "redefinition") {
			if strings.Contains(line, "syntax") || strings.Contains(line, "invalid") || strings.Contains(line, "unexpected") {
				broken[filepath.Base(line[:i+3])] = true
			}
		}
	}

	c := newTestChecker(t)
	type tally struct{ compared, same, agree, ours, theirs int }
	stats := map[bool]*tally{true: {}, false: {}} // by HumanEval or not
	var onlyOurs, onlyTheirs []string
	for _, p := range progs {
		st := stats[strings.HasPrefix(p.name, "humaneval_")]
		r := check(t, c, Python, p.code)
		if broken[p.name] || hasRule(r, RuleSyntaxError) {
			continue
		}
		st.compared++
		var ours []string
		for _, f := range r.Lint {
			if f.Rule == RuleUndefinedName || f.Rule == RuleUnusedImport {
				ours = append(ours, lintKey(strconv.Itoa(f.Line), f.Message))
			}
		}
		want := theirs[p.name]
		slices.Sort(ours)
		slices.Sort(want)
		if slices.Equal(ours, want) {
			st.same++
		}
		for _, m := range ours {
			if slices.Contains(want, m) {
				st.agree++
			} else {
				st.ours++
				onlyOurs = append(onlyOurs, p.name+":"+m)
			}
		}
		for _, m := range want {
			if !slices.Contains(ours, m) {
				st.theirs++
				onlyTheirs = append(onlyTheirs, p.name+":"+m)
			}
		}
	}
	for _, he := range []bool{true, false} {
		st, set := stats[he], "HumanEval prompts+solutions"
		if !he {
			set = "testdata Python"
		}
		t.Logf("pyflakes agreement, %s: %d programs, %d with the same messages; %d messages in both, %d only ours, %d only pyflakes'",
			set, st.compared, st.same, st.agree, st.ours, st.theirs)
	}
	for _, m := range onlyOurs {
		t.Logf("only ours: %s", m)
	}
	for _, m := range onlyTheirs {
		t.Logf("only pyflakes: %s", m)
	}
	// Every warning of ours must be one pyflakes gives too: a false
	// warning costs the model a wasted repair.
	if len(onlyOurs) > 0 {
		t.Errorf("%d warnings pyflakes does not give (see above)", len(onlyOurs))
	}
	if stats[true].agree+stats[false].agree == 0 {
		t.Errorf("no message in common: the comparison is broken")
	}
}

func lintKey(line, msg string) string {
	if strings.HasSuffix(msg, "imported but unused") {
		return msg
	}
	return line + " " + msg
}
