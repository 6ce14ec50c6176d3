package safety

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// corpusCase is one snippet of a corpus file. Want lists the rules that must
// fire; an empty Want in a clean corpus means no finding at all.
type corpusCase struct {
	Name string
	Want []string
	Code string
	Line int // line of the === header in the corpus file
}

// readCorpus parses a corpus file: each case starts with a line
// "=== NAME" or "=== NAME: rule, rule"; text before the first case is ignored.
func readCorpus(t testing.TB, path string) []corpusCase {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cases []corpusCase
	var cur *corpusCase
	var body []string
	flush := func() {
		if cur != nil {
			cur.Code = strings.Join(body, "\n") + "\n"
			cases = append(cases, *cur)
		}
	}
	for n, line := range strings.Split(strings.TrimRight(string(data), "\n"), "\n") {
		head, ok := strings.CutPrefix(line, "=== ")
		if !ok {
			body = append(body, line)
			continue
		}
		flush()
		body = nil
		name, rules, _ := strings.Cut(head, ":")
		c := corpusCase{Name: strings.TrimSpace(name), Line: n + 1}
		for _, r := range strings.Split(rules, ",") {
			if r = strings.TrimSpace(r); r != "" {
				if _, known := ruleCatalog[r]; !known {
					t.Fatalf("%s:%d: unknown rule %q", path, n+1, r)
				}
				c.Want = append(c.Want, r)
			}
		}
		cur = &c
	}
	flush()
	if len(cases) == 0 {
		t.Fatalf("%s: no cases", path)
	}
	return cases
}

func newTestChecker(t testing.TB) *Checker {
	t.Helper()
	c, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func check(t testing.TB, c *Checker, lang Language, code string) Report {
	t.Helper()
	r, err := c.Check(context.Background(), lang, []byte(code))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func rulesOf(r Report) []string {
	var out []string
	for _, f := range r.Findings {
		out = append(out, f.Rule)
	}
	return out
}

// TestEvasionCorpus: every evasion case raises each rule it names.
func TestEvasionCorpus(t *testing.T) {
	c := newTestChecker(t)
	for _, lang := range Languages() {
		path := filepath.Join("testdata", "evasion", string(lang)+".txt")
		for _, tc := range readCorpus(t, path) {
			t.Run(string(lang)+"/"+tc.Name, func(t *testing.T) {
				if len(tc.Want) == 0 {
					t.Fatalf("%s:%d: evasion case names no rule", path, tc.Line)
				}
				r := check(t, c, lang, tc.Code)
				got := rulesOf(r)
				for _, w := range tc.Want {
					if !slices.Contains(got, w) {
						t.Errorf("%s:%d: want rule %s, got %v\n%s", path, tc.Line, w, r.Findings, tc.Code)
					}
				}
				if slices.Contains(got, RuleSyntaxError) {
					t.Errorf("%s:%d: unexpected syntax error: %v", path, tc.Line, r.Findings)
				}
			})
		}
	}
}

// TestCleanCorpus: everyday code raises nothing.
func TestCleanCorpus(t *testing.T) {
	c := newTestChecker(t)
	for _, lang := range Languages() {
		path := filepath.Join("testdata", "clean", string(lang)+".txt")
		for _, tc := range readCorpus(t, path) {
			t.Run(string(lang)+"/"+tc.Name, func(t *testing.T) {
				if r := check(t, c, lang, tc.Code); !r.Safe() {
					t.Errorf("%s:%d: false alarm:\n%s\n%s", path, tc.Line, formatFindings(r.Findings), tc.Code)
				}
			})
		}
	}
}

func formatFindings(fs []Finding) string {
	var b strings.Builder
	for _, f := range fs {
		fmt.Fprintf(&b, "%d:%d %s `%s` %s\n    hint: %s\n", f.Line, f.Column, f.Rule, f.Text, f.Message, f.Hint)
	}
	return b.String()
}

// TestGolden compares the full findings (positions, texts, messages, hints)
// over both corpora with testdata/golden; run with -update to rewrite.
func TestGolden(t *testing.T) {
	c := newTestChecker(t)
	for _, kind := range []string{"evasion", "clean"} {
		for _, lang := range Languages() {
			name := kind + "-" + string(lang)
			t.Run(name, func(t *testing.T) {
				var b bytes.Buffer
				for _, tc := range readCorpus(t, filepath.Join("testdata", kind, string(lang)+".txt")) {
					fmt.Fprintf(&b, "=== %s\n%s", tc.Name, formatFindings(check(t, c, lang, tc.Code).Findings))
				}
				golden := filepath.Join("testdata", "golden", name+".golden")
				if *update {
					if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(golden, b.Bytes(), 0o644); err != nil {
						t.Fatal(err)
					}
					return
				}
				want, err := os.ReadFile(golden)
				if err != nil {
					t.Fatalf("%v (run go test ./safety -update to create it)", err)
				}
				if !bytes.Equal(want, b.Bytes()) {
					t.Errorf("findings differ from %s (run go test ./safety -update and review the diff):\n%s",
						golden, lineDiff(string(want), b.String()))
				}
			})
		}
	}
}

// lineDiff shows the first lines that differ.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	shown := 0
	for i := 0; i < max(len(w), len(g)) && shown < 10; i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			fmt.Fprintf(&b, "line %d:\n  want %s\n  got  %s\n", i+1, wl, gl)
			shown++
		}
	}
	return b.String()
}
