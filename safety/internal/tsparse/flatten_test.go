package tsparse

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	bash "github.com/tree-sitter/tree-sitter-bash/bindings/go"
	javascript "github.com/tree-sitter/tree-sitter-javascript/bindings/go"
	python "github.com/tree-sitter/tree-sitter-python/bindings/go"
)

var testLanguages = map[string]*Language{
	"python":     NewLanguage(python.Language()),
	"javascript": NewLanguage(javascript.Language()),
	"bash":       NewLanguage(bash.Language()),
}

// flattenInputs returns the corpus files whole (their "===" headers make
// syntax errors) and case by case, the bench file and HumanEval.
func flattenInputs(t testing.TB, lang string) [][]byte {
	var in [][]byte
	for _, kind := range []string{"clean", "evasion"} {
		data, err := os.ReadFile(filepath.Join("..", "..", "testdata", kind, lang+".txt"))
		if err != nil {
			t.Fatal(err)
		}
		in = append(in, data)
		for _, c := range bytes.Split(data, []byte("\n=== ")) {
			in = append(in, c)
		}
	}
	if lang == "python" {
		if b, err := os.ReadFile("../../testdata/bench/analysis.py"); err == nil {
			in = append(in, b)
		}
		if b, err := os.ReadFile("../../../../shared/data/humaneval.jsonl"); err == nil {
			in = append(in, b) // JSON lines: a long line of errors
			for _, line := range bytes.Split(b, []byte("\n")) {
				in = append(in, bytes.ReplaceAll(line, []byte(`\n`), []byte("\n")))
			}
		}
	}
	return in
}

// TestFastFlatten: sa_flatten_fast gives the same nodes as the public-API
// sa_flatten, in every grammar, on valid and broken code.
func TestFastFlatten(t *testing.T) {
	for name, lang := range testLanguages {
		if !lang.fast {
			t.Errorf("%s: the fast flatten is disabled: tsinternal.h does not match the tree-sitter runtime", name)
			continue
		}
		fast, slow := newParser(t, lang), newParser(t, lang)
		slow.slowFlatten = true
		nodes := 0
		for _, src := range flattenInputs(t, name) {
			nodes += compareFlatten(t, name, fast, slow, src)
		}
		t.Logf("%s: %d nodes compared", name, nodes)
	}
}

func newParser(t testing.TB, lang *Language) *Parser {
	p, err := NewParser(lang)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func compareFlatten(t testing.TB, name string, fast, slow *Parser, src []byte) int {
	a, err := fast.Parse(context.Background(), src, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := slow.Parse(context.Background(), src, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(a, b) {
		for i := range min(len(a), len(b)) {
			if a[i] != b[i] {
				t.Fatalf("%s: node %d: fast %+v, slow %+v\n%q", name, i, a[i], b[i], src)
			}
		}
		t.Fatalf("%s: fast gives %d nodes, slow %d\n%q", name, len(a), len(b), src)
	}
	return len(a)
}

// FuzzFastFlatten: the two flattens agree on any input in any grammar.
func FuzzFastFlatten(f *testing.F) {
	f.Add([]byte(selfCheckSource), uint8(0))
	f.Add([]byte("x = f(1)\n"), uint8(0))
	f.Add([]byte("a => ({b, ...c})\n"), uint8(1))
	f.Add([]byte("cat <<EOF | sh\n$(x)\nEOF\n"), uint8(2))
	names := []string{"python", "javascript", "bash"}
	parsers := map[string][2]*Parser{}
	for _, n := range names {
		fast, slow := newParser(f, testLanguages[n]), newParser(f, testLanguages[n])
		slow.slowFlatten = true
		parsers[n] = [2]*Parser{fast, slow}
	}
	f.Fuzz(func(t *testing.T, src []byte, l uint8) {
		if len(src) > 1<<12 {
			return
		}
		n := names[int(l)%len(names)]
		compareFlatten(t, n, parsers[n][0], parsers[n][1], src)
	})
}
