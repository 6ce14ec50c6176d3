package safety

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestSyntaxErrorIsAFinding(t *testing.T) {
	c := newTestChecker(t)
	r := check(t, c, Python, "x = 1\ndef f(:\n    pass\n")
	if len(r.Findings) == 0 || r.Findings[0].Rule != RuleSyntaxError || r.Findings[0].Line != 2 {
		t.Fatalf("want a syntax error on line 2, got %v", r.Findings)
	}
	r = check(t, c, JavaScript, "const x = ;\n")
	if !hasRule(r, RuleSyntaxError) {
		t.Fatalf("js: %v", r.Findings)
	}
}

func TestPositionsCountCharacters(t *testing.T) {
	c := newTestChecker(t)
	r := check(t, c, Python, "s = 'é'; eval('1')\n")
	if len(r.Findings) != 1 || r.Findings[0].Line != 1 || r.Findings[0].Column != 10 || r.Findings[0].Text != "eval" {
		t.Fatalf("got %+v", r.Findings)
	}
}

func TestInvalidUTF8AndBinary(t *testing.T) {
	c := newTestChecker(t)
	r := check(t, c, Python, "x = 1\ny = '\xff\xfe'\n")
	if !hasRule(r, RuleSyntaxError) || r.Findings[0].Line != 2 {
		t.Fatalf("invalid UTF-8: %v", r.Findings)
	}
	bin := make([]byte, 4096)
	for i := range bin {
		bin[i] = byte(i * 7)
	}
	for _, lang := range Languages() {
		r, err := c.Check(context.Background(), lang, bin)
		if err != nil || r.Safe() {
			t.Fatalf("%s binary: err=%v findings=%v", lang, err, r.Findings)
		}
		for _, f := range r.Findings {
			if !strings.Contains(f.Text, "\x00") && !bytes.Equal([]byte(f.Text), bytes.ToValidUTF8([]byte(f.Text), nil)) {
				t.Fatalf("finding text is not valid UTF-8: %q", f.Text)
			}
		}
	}
}

func TestDeepNesting(t *testing.T) {
	c := newTestChecker(t)
	for _, lang := range Languages() {
		code := strings.Repeat("(", 100000) + "eval" + strings.Repeat(")", 100000) + "\n"
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err := c.Check(ctx, lang, []byte(code))
		cancel()
		if err != nil {
			t.Fatalf("%s: %v", lang, err)
		}
	}
}

// TestLargeInput: a generated 10 MB file is checked within a deadline when
// the policy allows it, and a file over the limit is reported without
// parsing.
func TestLargeInput(t *testing.T) {
	if testing.Short() {
		t.Skip("large input")
	}
	p := DefaultPolicy()
	p.MaxInputBytes = 16 << 20
	c, err := New(p)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	src, err := readBenchFile()
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	for b.Len() < 10<<20 {
		b.Write(src)
	}
	b.WriteString("eval('1')\n")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	start := time.Now()
	r, err := c.Check(ctx, Python, b.Bytes())
	if err != nil {
		t.Fatalf("10 MB input: %v", err)
	}
	t.Logf("10 MB input: %v, %d findings", time.Since(start), len(r.Findings))
	if !hasRule(r, RuleForbiddenBuiltin) {
		t.Fatalf("the eval at the end was missed: %v", r.Findings)
	}
	big := bytes.Repeat([]byte("x = 1\n"), (defaultMaxInput/6)+1)
	r, err = newTestChecker(t).Check(context.Background(), Python, big)
	if err != nil || len(r.Findings) != 1 || r.Findings[0].Rule != RuleInputTooLarge {
		t.Fatalf("oversized input: err=%v findings=%v", err, r.Findings)
	}
}

// TestCheckerBudgets: with the default policy a legal 6 MB file is refused
// at once as too large, and code whose syntax tree outgrows the memory
// budget is reported as too large or complex, not parsed to the end.
func TestCheckerBudgets(t *testing.T) {
	c := newTestChecker(t)
	src, err := readBenchFile()
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	for b.Len() < 6<<20 {
		b.Write(src)
	}
	start := time.Now()
	r, err := c.Check(context.Background(), Python, b.Bytes())
	if err != nil || len(r.Findings) != 1 || r.Findings[0].Rule != RuleInputTooLarge ||
		!strings.Contains(r.Findings[0].Message, "too large to check: more than the checker's limit of 4 MiB") {
		t.Fatalf("6 MB: err=%v findings=%v", err, r.Findings)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("refusing 6 MB took %v", d)
	}

	// 1 MiB of dense code (one-line statements, some 165 bytes of tree
	// per byte) fits the default memory budget; with a budget of 16 bytes
	// per byte it does not, and the parse stops there, in pieces too.
	dense := strings.Repeat("x = 1\n", 1<<20/6)
	if r := check(t, c, Python, dense); !r.Safe() {
		t.Errorf("1 MiB, default budget: %v", r.Findings[0])
	}
	p := DefaultPolicy()
	p.ParseMemoryPerByte = 16
	tight, err := New(p)
	if err != nil {
		t.Fatal(err)
	}
	defer tight.Close()
	start = time.Now()
	r = check(t, tight, Python, dense)
	if len(r.Findings) != 1 || r.Findings[0].Rule != RuleInputTooLarge ||
		!strings.Contains(r.Findings[0].Message, "too large or too complex to check: its syntax tree needs more than the checker's memory budget of 144 MiB for 1024 KiB of code") {
		t.Fatalf("1 MiB, 16 bytes per byte: %v", r.Findings)
	}
	t.Logf("given up after %v", time.Since(start))
	for _, bad := range []int{-1, maxParseMemoryPerByte + 1} {
		p.ParseMemoryPerByte = bad
		if err := p.Validate(); err == nil || !strings.Contains(err.Error(), "parse_memory_per_byte") {
			t.Errorf("parse_memory_per_byte %d: %v", bad, err)
		}
	}
}

// TestPathologicalInputIsBounded: inputs on which tree-sitter's error
// recovery is quadratic end within the parse budget with a finding.
func TestPathologicalInputIsBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("slow")
	}
	c := newTestChecker(t)
	for _, in := range []struct {
		lang Language
		code string
	}{
		{JavaScript, strings.Repeat("'", 200000)},
		{Bash, strings.Repeat("<<EOF\n", 40000)},
	} {
		start := time.Now()
		r, err := c.Check(context.Background(), in.lang, []byte(in.code))
		d := time.Since(start)
		if err != nil || !hasRule(r, RuleSyntaxError) {
			t.Fatalf("%s: err=%v findings=%v", in.lang, err, r.Findings)
		}
		if limit := parseBudget(len(in.code)) + 2*time.Second; d > limit {
			t.Fatalf("%s: took %v, budget %v", in.lang, d, limit)
		}
		t.Logf("%s %d bytes: %v", in.lang, len(in.code), d)
	}
}

func TestCanceled(t *testing.T) {
	c := newTestChecker(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Check(ctx, Python, []byte("x = 1\n")); !errors.Is(err, context.Canceled) {
		t.Fatalf("want context.Canceled, got %v", err)
	}
	// The checker is still usable.
	if r := check(t, c, Python, "x = 1\n"); !r.Safe() {
		t.Fatal(r.Findings)
	}
}

func TestFindingLimit(t *testing.T) {
	c := newTestChecker(t)
	r := check(t, c, Python, strings.Repeat("eval('1')\n", 500))
	if len(r.Findings) != 101 || r.Findings[100].Rule != RuleFindingLimit || !strings.HasPrefix(r.Findings[100].Message, "400 more") {
		t.Fatalf("got %d findings, last %v", len(r.Findings), r.Findings[len(r.Findings)-1])
	}
}

func TestUnsupportedLanguage(t *testing.T) {
	c := newTestChecker(t)
	if _, err := c.Check(context.Background(), "cobol", nil); !errors.Is(err, ErrUnsupportedLanguage) {
		t.Fatalf("got %v", err)
	}
	if _, err := ParseLanguage("cobol"); err == nil {
		t.Fatal("ParseLanguage accepted cobol")
	}
	for name, want := range map[string]Language{"a.py": Python, "b.mjs": JavaScript, "c.cjs": JavaScript, "d.js": JavaScript, "e.sh": Bash, "f.BASH": Bash} {
		if got, ok := LanguageForFile(name); !ok || got != want {
			t.Errorf("%s: %q %v", name, got, ok)
		}
	}
	if _, ok := LanguageForFile("x.txt"); ok {
		t.Error("x.txt has no language")
	}
}

// TestConcurrent runs checks in parallel on one Checker (run with -race).
func TestConcurrent(t *testing.T) {
	c := newTestChecker(t)
	src, err := readBenchFile()
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				r, err := c.Check(context.Background(), Python, src)
				if err != nil || !r.Safe() {
					t.Errorf("err=%v findings=%v", err, r.Findings)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func TestDecodePyEscapes(t *testing.T) {
	for in, want := range map[string]string{
		`\x5f\x5fclass\x5f\x5f`: "__class__",
		`\u005f\U0000005f`:      "__",
		`\137\137`:              "__",
		`\N{LOW LINE}a`:         "_a",
		`a\qb`:                  `a\qb`,
		`\x5`:                   `\x5`,
		`tail\`:                 `tail\`,
	} {
		if got := decodePyEscapes(in, false); got != want {
			t.Errorf("%q: got %q want %q", in, got, want)
		}
	}
	if got := decodePyEscapes(`\x5f`, true); got != `\x5f` {
		t.Errorf("raw string decoded: %q", got)
	}
}

func TestPathOutside(t *testing.T) {
	allowed := []string{"/dev/null", "/workspace/"}
	for p, bad := range map[string]bool{
		"out.json": false, "data/x.csv": false, "./x": false, "a..b": false,
		"/etc/passwd": true, "../x": true, "a/../../x": true, "~/.ssh": true,
		`C:\x`: true, "/dev/null": false, "/workspace/out": false, "file:///etc": true,
	} {
		if got := pathOutside(p, true, allowed) != ""; got != bad {
			t.Errorf("%q: outside=%v want %v", p, got, bad)
		}
	}
}
