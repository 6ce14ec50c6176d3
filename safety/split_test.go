package safety

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/codeagent/codeagent/safety/internal/tsparse"
)

// splitInputs returns the Python sources the split tests run on: every
// corpus case, the HumanEval tasks (when the data set is there), the bench
// file alone and repeated, and cases written to stress the cut scan.
func splitInputs(t testing.TB) map[string][]byte {
	t.Helper()
	in := map[string][]byte{}
	for _, kind := range []string{"clean", "evasion"} {
		path := filepath.Join("testdata", kind, "python.txt")
		for _, tc := range readCorpus(t, path) {
			in[kind+"/"+tc.Name] = []byte(tc.Code)
		}
	}
	if f, err := os.Open(humanEvalPath); err == nil {
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			var task struct {
				TaskID   string `json:"task_id"`
				Prompt   string `json:"prompt"`
				Solution string `json:"canonical_solution"`
				Test     string `json:"test"`
			}
			if err := json.Unmarshal(sc.Bytes(), &task); err != nil {
				t.Fatal(err)
			}
			in[task.TaskID] = []byte(task.Prompt + task.Solution + "\n" + task.Test)
		}
		f.Close()
	} else if !testing.Short() {
		t.Fatalf("HumanEval data set is required for this test: %v (run with -short to skip)", err)
	}
	bench, err := readBenchFile()
	if err != nil {
		t.Fatal(err)
	}
	in["bench"] = bench
	in["bench x3"] = bytes.Repeat(bench, 3)
	for i, s := range splitEdgeCases {
		in[fmt.Sprintf("edge %d", i)] = []byte(s)
	}
	return in
}

// splitEdgeCases put lines that look like statements at column 0 where a
// cut would be wrong, and constructs whose end is subtle.
var splitEdgeCases = []string{
	"def f():\n    x = 1\n# col-0 comment\n    y = 2\nz = eval(x)\n",
	"def f():\n    x = 1\n    # trailing comment\n\n\nz = 3\nw = 4\n",
	"def f():\n    x = 1\n# comment\n\nz = 3\n",
	"if a:\n    b = 1\nelse:\n    b = 2\nc = 3\n",
	"try:\n    a = 1\nexcept E:\n    a = 2\nfinally:\n    a = 3\nb = 4\n",
	"@dec\ndef f():\n    pass\n@dec(\n  1)\nclass C:\n    pass\nx = 1\n",
	"x = 1 + \\\ny\nz = 2\n",
	"x = 1 + \\\r\ny\r\nz = 2\r\n",
	"s = '''\nimport os\nos.system(x)\n'''\nt = 1\n",
	"s = \"\"\"a\\\"\"\"\nimport os\n\"\"\"\nt = 1\n",
	"s = r'\\'\nimport os\n'\nt = 1\n",
	"s = f\"{x[\"a\"]}\"\nimport os\ny = f'{a:{b}}'\nz = 1\n",
	"s = f'''{\nx\n}'''\nimport os\nz = 1\n",
	"s = f\"\\N{LOW LINE}{x}\"\nz = eval(1)\nw = 2\n",
	"s = rf\"\\{x}\"\nz = 1\nw = 2\n",
	"s = b\"\\N{x}\"\nz = 1\nw = 2\n",
	"x = (1,\n2)\ny = [\n1]\nz = {\n}\nw = 1\n",
	"x = `a`\ny = 1\nz = 2\n",
	"print 'a'\nexec 'b'\nx = 1\n",
	"match x:\n    case 1:\n        pass\ny = 1\nz = 2\n",
	"class A:\n    def f(self):\n        return 1\n\n\n    def g(self):\n        return 2\nx = A()\n",
	"while True:\n    pass\nx = 1\ny = 2\n",
	"if x: y = 1\nelif z: y = 2\nw = 3\n",
	"x = 1\n\x0c\ny = 2\nz = 3\n",
	"x = 1;\ny = 2; z = 3\nw = 4\n",
	"async def f():\n    await g()\nasync_x = 1\nw = 2\n",
	"x = 1 # comment \\\ny = 2\nz = 3\n",
	"lambda: (yield)\nx = 1\ny = 2\n",
	"x = 'unterminated\ny = 1\nz = 2\n",
	"x = (1\ny = 1\nz = 2\n",
	"x = 1)\ny = 1\nz = 2\n",
	"def f(:\n    pass\ny = 1\nz = 2\n",
	"x = 1\n    y = 2\nz = 3\n",
	"import os\nfrom os import path as p\nx = p.join('a')\ny = __import__('os')\n",
	"\ufeffx = 1\ny = 2\nz = 3\n",
	"x = '''a''' '''b'''\ny = 'a' \\\n 'b'\nz = 1\n",
	"for i in range(3):\n    pass\nelse:\n    pass\nz = 1\n",
	"with open('a') as f:\n    pass\nz = open('/etc/passwd')\n",
	"x = 1\n\n\n\n",
	"# only a comment\nx = 1\n# trailing\n",
	"global_ = 1\nnonlocal_ = 2\nx = 3\n",
	"x = 1 \\\ny = 2\nz = 3\n",
	"x = 1 \\\n\ny = 2\nz = 3\n",
	"x = 1 \\\n# c\ny = 2\nz = 3\n",
	"x = 1 # c \\\ny = 2\nz = 3\n",
	"@dec\nx = 1\ny = 2\n",
	"@dec\n\ndef f(): pass\ny = 2\n",
	"@dec\n# c\ndef f(): pass\ny = 2\n",
	"def f():\ny = 2\nz = 3\n",
	"class C:\ny = 2\nz = 3\n",
	"if x:\ny = 2\nz = 3\n",
	"s = f\"{'#'}\" \\\ny = eval(1)\nz = 3\n",
	"s = f\"{\"#\"}\" \\\ny = eval(1)\nz = 3\n",
	"s = f\"{x:#}\" \\\ny = eval(1)\nz = 3\n",
	"s = f'{x!r:>{w}}' \\\ny = eval(1)\nz = 3\n",
	"s = fr'\\{x}' \\\ny = eval(1)\nz = 3\n",
	"s = u'\\N{DIGIT ONE}' \\\ny = eval(1)\nz = 3\n",
	"s = f'\\N{DIGIT ONE}{x}' \\\ny = eval(1)\nz = 3\n",
	"s = f'{{x}}' \\\ny = eval(1)\nz = 3\n",
	"s = f'{x:{{y}}}' \\\ny = eval(1)\nz = 3\n",
	"s = f'{(lambda: 1)()}' \\\ny = eval(1)\nz = 3\n",
	"s = f'{a:=1}' \\\ny = eval(1)\nz = 3\n",
	"s = f'{d[\"k\"]:>{w}.{p}f}' '#' \\\ny = eval(1)\nz = 3\n",
}

// splitTree parses code cut at the given offsets with parseCut.
func splitTree(t testing.TB, pp *parserPool, code []byte, cuts []int) []tsparse.Node {
	t.Helper()
	tr, release, err := pp.parseCut(context.Background(), code, func([]byte) []int { return cuts })
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	return append([]tsparse.Node(nil), tr.nodes...)
}

// TestSplitParseMatchesWhole cuts every input at every line the cut scan
// accepts (and at the cuts pyCuts picks for 2 to 4 pieces), and checks that
// whenever no piece has a syntax error, the appended trees equal the tree of
// the whole input node for node, so a split can never change a finding.
func TestSplitParseMatchesWhole(t *testing.T) {
	pp := newParserPool(pythonGrammar(), 8, nil)
	defer pp.close()
	var cuts, merged, fellBack int
	for name, code := range splitInputs(t) {
		whole := splitTree(t, pp, code, nil)
		var cands []int
		cs := cutScan{each: func(p int) { cands = append(cands, p) }}
		clean := utf8Valid(code) && cs.scan(code)
		try := func(at []int) {
			cuts++
			got := splitTree(t, pp, code, at)
			if !reflect.DeepEqual(got, whole) {
				t.Fatalf("%s: cut at %v: tree differs from the whole parse\n%s", name, at, code)
			}
			if piecesParse(t, pp, code, at) {
				merged++
			} else {
				fellBack++
			}
		}
		if clean {
			for _, p := range cands {
				try([]int{p})
			}
		}
		for k := 2; k <= 4; k++ {
			if at := pyCuts(code, k); at != nil {
				try(at)
			}
		}
	}
	t.Logf("%d cuts: %d merged, %d fell back to a whole parse", cuts, merged, fellBack)
	if merged == 0 || merged < 10*fellBack {
		t.Errorf("too few merged parses: %d merged, %d fell back", merged, fellBack)
	}
}

func utf8Valid(b []byte) bool { return invalidUTF8(b) < 0 }

// piecesParse reports whether every piece parses without a syntax error,
// that is, whether parseCut used the merged tree.
func piecesParse(t testing.TB, pp *parserPool, code []byte, at []int) bool {
	lo := 0
	for i := 0; i <= len(at); i++ {
		hi := len(code)
		if i < len(at) {
			hi = at[i]
		}
		tr, release, err := pp.parse(context.Background(), code[lo:hi])
		if err != nil {
			t.Fatal(err)
		}
		bad := tsparse.HasError(tr.nodes)
		release()
		if bad {
			return false
		}
		lo = hi
	}
	return true
}

// TestSplitFindingsMatchWhole: the findings of a split check equal those of
// a whole-file check, for every input cut at the middle.
func TestSplitFindingsMatchWhole(t *testing.T) {
	c := newTestChecker(t)
	a := *c.analysers[Python].(*pyAnalyser)
	whole, split := a, a
	whole.split = func([]byte) []int { return nil }
	split.split = func(code []byte) []int { return pyCuts(code, 2) }
	run := func(a *pyAnalyser, code []byte) []Finding {
		out := newCollector(code, c.policy)
		checkEncoding(code, out)
		if err := a.analyse(context.Background(), code, out); err != nil {
			t.Fatal(err)
		}
		return out.result()
	}
	n := 0
	for name, code := range splitInputs(t) {
		w, s := run(&whole, code), run(&split, code)
		if !reflect.DeepEqual(w, s) {
			t.Errorf("%s: findings differ\nwhole:\n%s\nsplit:\n%s", name, formatFindings(w), formatFindings(s))
		}
		if pyCuts(code, 2) != nil {
			n++
		}
	}
	t.Logf("%d inputs had a cut", n)
}

// TestSplitBenchFile: the bench file is large enough to be split, and is.
func TestSplitBenchFile(t *testing.T) {
	src, err := readBenchFile()
	if err != nil {
		t.Fatal(err)
	}
	if splitPieces(len(src)) < 2 {
		t.Skip("one CPU: no parallel parse")
	}
	at := pySplit(src)
	if len(at) == 0 {
		t.Fatal("no cut found in the bench file")
	}
	pp := newParserPool(pythonGrammar(), 8, nil)
	defer pp.close()
	if !piecesParse(t, pp, src, at) {
		t.Fatalf("cut at %v gives a piece with a syntax error", at)
	}
	if !strings.HasSuffix(string(src[:at[0]]), "\n") {
		t.Fatalf("cut at %d is not at a line start", at[0])
	}
}

// TestSplitSafetyNet cuts every input at every line that cutOK accepts,
// without the lexical scan (so also inside strings and brackets), and
// checks that parseCut still gives the whole tree: a cut the scan gets wrong
// leaves a syntax error in a piece, and parseCut falls back.
func TestSplitSafetyNet(t *testing.T) {
	pp := newParserPool(pythonGrammar(), 8, nil)
	defer pp.close()
	var cuts, fellBack int
	for name, code := range splitInputs(t) {
		whole := splitTree(t, pp, code, nil)
		for p := 1; p < len(code); p++ {
			if !cutOK(code, p) {
				continue
			}
			cuts++
			if !reflect.DeepEqual(splitTree(t, pp, code, []int{p}), whole) {
				t.Errorf("%s: cut at %d: tree differs from the whole parse: %q | %q", name, p,
					code[max(0, p-60):p], code[p:min(len(code), p+40)])
			}
			if !piecesParse(t, pp, code, []int{p}) {
				fellBack++
			}
		}
	}
	t.Logf("%d cuts, %d fell back to a whole parse", cuts, fellBack)
}

// FuzzSplitParse: for any input, parseCut at any line that cutOK accepts
// gives the tree of the whole input.
func FuzzSplitParse(f *testing.F) {
	for _, s := range splitEdgeCases {
		f.Add([]byte(s), uint16(0))
	}
	bench, err := readBenchFile()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(bench[:2000], uint16(1000))
	pp := newParserPool(pythonGrammar(), 8, nil)
	defer pp.close()
	f.Fuzz(func(t *testing.T, code []byte, at uint16) {
		if len(code) > 1<<14 {
			return
		}
		var cuts []int
		if at == 0 {
			cuts = pyCuts(code, 2)
		} else {
			// The first line cutOK accepts from at on.
			for p := int(at) % (len(code) + 1); p < len(code); p++ {
				if cutOK(code, p) {
					cuts = []int{p}
					break
				}
			}
		}
		if len(cuts) == 0 {
			return
		}
		whole := splitTree(t, pp, code, nil)
		if got := splitTree(t, pp, code, cuts); !reflect.DeepEqual(got, whole) {
			t.Fatalf("cut at %v: tree differs from the whole parse\n%q", cuts, code)
		}
	})
}

// TestSplitConcurrent checks split-sized files from many goroutines at once
// (run it with -race): pooled parsers, helpers and tree hand-offs must not
// mix up checks.
func TestSplitConcurrent(t *testing.T) {
	bench, err := readBenchFile()
	if err != nil {
		t.Fatal(err)
	}
	// The bench file with an eval appended and prepended at known lines.
	bad := append(append([]byte("x = eval('1')\n"), bench...), "y = eval('2')\n"...)
	c := newTestChecker(t)
	want := check(t, c, Python, string(bad)).Findings
	if len(want) != 2 || want[0].Line != 1 || want[1].Line != bytes.Count(bad, []byte("\n")) {
		t.Fatalf("findings %v", want)
	}
	done := make(chan error)
	for g := 0; g < 8; g++ {
		go func() {
			for i := 0; i < 20; i++ {
				src := bench
				if (g+i)%2 == 0 {
					src = bad
				}
				r, err := c.Check(context.Background(), Python, src)
				switch {
				case err != nil:
					done <- err
					return
				case (g+i)%2 == 0 && !reflect.DeepEqual(r.Findings, want):
					done <- fmt.Errorf("findings %v, want %v", r.Findings, want)
					return
				case (g+i)%2 != 0 && !r.Safe():
					done <- fmt.Errorf("false alarm %v", r.Findings)
					return
				}
			}
			done <- nil
		}()
	}
	for g := 0; g < 8; g++ {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}

// TestSplitCanceled: a canceled context ends a split parse with an error.
func TestSplitCanceled(t *testing.T) {
	bench, err := readBenchFile()
	if err != nil {
		t.Fatal(err)
	}
	c := newTestChecker(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Check(ctx, Python, bytes.Repeat(bench, 4)); err == nil {
		t.Fatal("want an error for a canceled context")
	}
	if _, err := c.Check(context.Background(), Python, bench); err != nil {
		t.Fatal(err)
	}
}

// TestReportDoesNotAliasInput: findings stay the same when the caller
// reuses its buffer after Check (the analysers read source text without
// copying it).
func TestReportDoesNotAliasInput(t *testing.T) {
	c := newTestChecker(t)
	for _, tc := range readCorpus(t, filepath.Join("testdata", "evasion", "python.txt")) {
		code := []byte(tc.Code)
		r, err := c.Check(context.Background(), Python, code)
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprint(r.Findings)
		for i := range code {
			code[i] = 'X'
		}
		if got := fmt.Sprint(r.Findings); got != want {
			t.Fatalf("%s: findings changed with the input buffer:\n%s\n%s", tc.Name, want, got)
		}
	}
}
