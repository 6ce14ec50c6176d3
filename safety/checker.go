package safety

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/codeagent/codeagent/lang"
	"github.com/codeagent/codeagent/safety/internal/tsparse"
)

// Language names a supported source language.
type Language string

const (
	Python     Language = "python"
	JavaScript Language = "javascript"
	Bash       Language = "bash"
	Go         Language = "go"
)

// Languages lists the supported languages.
func Languages() []Language { return []Language{Python, JavaScript, Bash, Go} }

// ParseLanguage returns the Language called name or one of its aliases
// ("py", "js", ...), as package lang, the one registry of languages,
// knows them; or an error naming the supported ones.
func ParseLanguage(name string) (Language, error) {
	l, err := lang.Lookup(name)
	if err != nil {
		return "", err
	}
	return Language(l.Name), nil
}

// LanguageForFile guesses the language from a file name's extension (as
// lang.Detect).
func LanguageForFile(name string) (Language, bool) {
	l, err := lang.Detect(name)
	if err != nil {
		return "", false
	}
	return Language(l.Name), true
}

// hardMaxInput is the largest max_input_bytes a policy may set: tree-sitter
// offsets are 32-bit and node arrays grow with the input.
const hardMaxInput = 256 << 20

// defaultMaxInput applies when the policy leaves max_input_bytes at 0. A
// check costs time and memory in proportion to the input (some 1 µs and
// 60 bytes per byte of ordinary code, up to 250 bytes for dense code), so
// the cap is what a client of the server can make it pay per request.
const defaultMaxInput = 4 << 20

// Parse memory budget: a parse of n bytes may hold parseMemoryBase plus
// policy.ParseMemoryPerByte (default defaultParseMemoryPerByte) bytes per
// input byte, in tree-sitter's tree and stacks and in the flattened nodes.
// Ordinary code needs 50 to 70 bytes per byte, a large data literal about
// 90, a file of one-line statements (x = 1) 165, one long expression 180.
// So code up to 1 MiB always fits (224 MiB), and at the default input cap
// (4 MiB, 512 MiB) all but the densest code does; past the budget the
// check gives up with a finding (RuleInputTooLarge) instead of growing.
const (
	parseMemoryBase           = 128 << 20
	defaultParseMemoryPerByte = 96
	maxParseMemoryPerByte     = 4096
)

// ErrUnsupportedLanguage is returned by Check for a language it does not know.
var ErrUnsupportedLanguage = errors.New("unsupported language")

// analyser checks code in one language.
//
// analyse parses code and adds findings to out. It must not keep code, out
// or any tree after it returns, must be safe for concurrent use, and returns
// an error only when ctx ends (or the parser cannot be created).
type analyser interface {
	analyse(ctx context.Context, code []byte, out *collector) error
}

// Checker checks code against a policy. Build one with New and reuse it: it
// pools tree-sitter parsers, and it is safe for concurrent use. Close it to
// free the pooled parsers.
type Checker struct {
	// NoLint turns the lint warnings (Report.Lint) off. Set it before the
	// first Check.
	NoLint bool

	policy    *Policy
	analysers map[Language]analyser
	pools     []*parserPool
}

// New returns a Checker for p, or DefaultPolicy when p is nil. p is validated
// and must not be changed afterwards.
func New(p *Policy) (*Checker, error) {
	if p == nil {
		p = DefaultPolicy()
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	size := 2 * runtime.GOMAXPROCS(0)
	mem := memBudget(p)
	py := newParserPool(pythonGrammar(), size, mem)
	js := newParserPool(jsGrammar(), size, mem)
	sh := newParserPool(bashGrammar(), size, mem)
	return &Checker{
		policy: p,
		analysers: map[Language]analyser{
			Python:     newPythonAnalyser(p, py),
			JavaScript: newJSAnalyser(p, js),
			Bash:       newBashAnalyser(p, sh),
			Go:         newGoAnalyser(p),
		},
		pools: []*parserPool{py, js, sh},
	}, nil
}

// Policy returns the checker's policy. Do not modify it.
func (c *Checker) Policy() *Policy { return c.policy }

// Close frees the pooled parsers. The Checker must not be used afterwards.
func (c *Checker) Close() {
	for _, p := range c.pools {
		p.close()
	}
}

// Check parses code as lang and returns its findings. A syntax error, invalid
// UTF-8 or an oversized input is a finding, not an error; the error is
// non-nil only for an unknown language or when ctx ends.
func (c *Checker) Check(ctx context.Context, lang Language, code []byte) (Report, error) {
	a, ok := c.analysers[lang]
	if !ok {
		return Report{}, fmt.Errorf("%w: %q", ErrUnsupportedLanguage, lang)
	}
	out := newCollector(code, c.policy)
	limit := c.policy.InputLimit()
	if len(code) > limit {
		out.add(RuleInputTooLarge, 0, 0,
			fmt.Sprintf("the input is too large to check: more than the checker's limit of %s (%d bytes)", sizeText(int64(limit)), limit),
			tooLargeHint)
		return Report{Language: lang, Findings: out.result()}, nil
	}
	checkEncoding(code, out)
	if !c.NoLint {
		out.lint = newCollector(code, c.policy)
	}
	if err := a.analyse(ctx, code, out); err != nil {
		switch {
		case errors.Is(err, tsparse.ErrTooLarge):
			out.add(RuleInputTooLarge, 0, 0,
				fmt.Sprintf("the input is too large or too complex to check: its syntax tree needs more than the checker's memory budget of %s for %s of code",
					sizeText(memBudget(c.policy)(len(code))), sizeText(int64(len(code)))),
				tooLargeHint)
		case errors.Is(err, tsparse.ErrTooComplex):
			out.add(RuleSyntaxError, 0, 0,
				fmt.Sprintf("the checker gave up: parsing %s of code took longer than its budget of %s; the code is too large or too irregular (unterminated strings, comments or brackets) to check",
					sizeText(int64(len(code))), parseBudget(len(code)).Round(time.Second)),
				"check for unterminated strings, comments or brackets; generated code should be ordinary source text")
		default:
			return Report{}, err
		}
		out.lint = nil // the tree is not whole
	}
	return Report{Language: lang, Findings: out.result(), Lint: out.lint.lintResult()}, nil
}

// InputLimit is the largest input the checker parses under p.
func (p *Policy) InputLimit() int {
	if p.MaxInputBytes == 0 {
		return defaultMaxInput
	}
	return p.MaxInputBytes
}

// MaxInputLimit is the largest max_input_bytes a policy may set.
const MaxInputLimit = hardMaxInput

const tooLargeHint = "split the program into smaller files, and keep data in data files instead of in the code"

// memBudget is the parse memory budget of policy p, per input size.
func memBudget(p *Policy) func(n int) int64 {
	per := int64(p.ParseMemoryPerByte)
	if per == 0 {
		per = defaultParseMemoryPerByte
	}
	return func(n int) int64 { return parseMemoryBase + per*int64(n) }
}

// sizeText renders n bytes for findings, e.g. "4 MiB" or "312 bytes".
func sizeText(n int64) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d bytes", n)
	case n < 1<<20:
		return strings.Replace(fmt.Sprintf("%.1f KiB", float64(n)/(1<<10)), ".0 ", " ", 1)
	}
	return strings.Replace(fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)), ".0 ", " ", 1)
}

// checkEncoding reports the first invalid UTF-8 sequence and the first NUL
// byte: interpreters reject both, and they can hide code from a reader.
func checkEncoding(code []byte, out *collector) {
	if i := invalidUTF8(code); i >= 0 {
		out.add(RuleSyntaxError, i, i+1, "the file is not valid UTF-8",
			"save the source as UTF-8; write non-ASCII text with \\u escapes if in doubt")
	}
	if i := bytes.IndexByte(code, 0); i >= 0 {
		out.add(RuleSyntaxError, i, i+1, "the file contains a NUL byte",
			"remove the NUL byte; write it as \\0 or \\x00 inside a string if you need it")
	}
}

func invalidUTF8(b []byte) int {
	if utf8.Valid(b) {
		return -1
	}
	for i := 0; i < len(b); {
		if b[i] < utf8.RuneSelf {
			i++
			continue
		}
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 {
			return i
		}
		i += n
	}
	return -1
}

// parserPool is a bounded free list of parsers for one grammar. Unlike a
// sync.Pool it never drops a parser without closing it, so C memory is not
// leaked.
type parserPool struct {
	g    *grammar
	free chan *worker
	mem  func(n int) int64 // the parse memory budget
}

// worker is a parser with its reusable node buffer.
type worker struct {
	p   *tsparse.Parser
	buf []tsparse.Node
}

// parseBudget bounds a parse's time linearly in the input: ordinary code
// parses at several MB/s, while tree-sitter's error recovery is quadratic on
// some hostile inputs (a 40 KB run of quotes takes seconds).
func parseBudget(n int) time.Duration {
	return 2*time.Second + time.Duration(n)*2*time.Microsecond
}

// maxKeptNodes bounds the node buffer a pooled worker keeps (about 28 MB).
const maxKeptNodes = 1 << 20

func newParserPool(g *grammar, size int, mem func(int) int64) *parserPool {
	return &parserPool{g: g, free: make(chan *worker, size), mem: mem}
}

func (pp *parserPool) get() (*worker, error) {
	select {
	case w := <-pp.free:
		return w, nil
	default:
	}
	p, err := tsparse.NewParser(pp.g.lang)
	if err != nil {
		return nil, err
	}
	p.Budget, p.MemBudget = parseBudget, pp.mem
	return &worker{p: p}, nil
}

func (pp *parserPool) put(w *worker) {
	if cap(w.buf) > maxKeptNodes {
		w.buf = nil
	}
	select {
	case pp.free <- w:
	default:
		w.p.Close()
	}
}

func (pp *parserPool) close() {
	for {
		select {
		case w := <-pp.free:
			w.p.Close()
		default:
			return
		}
	}
}

// parse parses code with a pooled parser and returns its tree. The tree's
// nodes live in a buffer that goes back to the pool on release.
func (pp *parserPool) parse(ctx context.Context, code []byte) (*tree, func(), error) {
	w, err := pp.get()
	if err != nil {
		return nil, nil, err
	}
	nodes, err := w.p.Parse(ctx, code, w.buf)
	if err != nil {
		pp.put(w)
		return nil, nil, err
	}
	w.buf = nodes
	return newTree(code, nodes, pp.g), func() { pp.put(w) }, nil
}

// parseCut is parse for inputs that can be cut at top-level statements (see
// py_split.go): cuts returns the increasing offsets to cut code at, at most
// splitMaxPieces-1 of them. parseCut parses the pieces on parallel threads
// and appends their trees, which gives the tree of the whole input. When
// cuts returns none, a piece has an ERROR or MISSING node, or a piece's
// parse fails other than by ctx ending, it parses the input whole.
func (pp *parserPool) parseCut(ctx context.Context, code []byte, cuts func([]byte) []int) (*tree, func(), error) {
	at := cuts(code)
	k := len(at) + 1
	if k < 2 || k > splitMaxPieces {
		return pp.parse(ctx, code)
	}
	s := &splitRun{ctx: ctx, code: code, at: at, k: k}
	if pp.mem != nil {
		s.mem = pp.mem(len(code)) // shared out by the pieces' sizes
	}
	ws := s.ws[:k]
	for i := range ws {
		w, err := pp.get()
		if err != nil {
			for _, w := range ws[:i] {
				pp.put(w)
			}
			return nil, nil, err
		}
		ws[i] = w
	}
	s.wg.Add(k)
	for range min(runtime.GOMAXPROCS(0), k) - 1 {
		go s.help()
	}
	mine := s.run(make([]tsparse.Tree, 0, k))
	// Hand this goroutine's trees to a helper to free, if one is still
	// running; freeing them here would delay the rules.
	if !s.handoff.CompareAndSwap(nil, &mine) {
		for _, t := range mine {
			t.Free()
		}
	}
	s.wg.Wait()
	whole := false
	for i, err := range s.errs[:k] {
		switch {
		case err != nil && (ctx.Err() != nil || errors.Is(err, tsparse.ErrTooLarge)):
			// Out of memory, the whole input would fail alike (its budget
			// is about the pieces' added up). Out of time it might not: a
			// cut inside a string makes error recovery slow.
			for _, w := range ws {
				pp.put(w)
			}
			return nil, nil, err
		case err != nil || s.bad[i]:
			whole = true
		}
	}
	if whole {
		for _, w := range ws {
			pp.put(w)
		}
		return pp.parse(ctx, code)
	}
	nodes, total := ws[0].buf, 0
	for _, w := range ws {
		total += len(w.buf) - 1
	}
	if total++; cap(nodes) < total {
		nodes = append(make([]tsparse.Node, 0, total), nodes...)
	}
	for i := 1; i < k; i++ {
		nodes = tsparse.AppendTree(nodes, ws[i].buf, uint32(s.at[i-1]))
	}
	w0 := ws[0]
	w0.buf = nodes
	for _, w := range ws[1:] {
		pp.put(w) // their nodes have been copied
	}
	return newTree(code, nodes, pp.g), func() { pp.put(w0) }, nil
}

// splitRun is one parallel parse. Pieces are claimed in order by the
// calling goroutine and by helpers, one per other CPU; when a helper starts
// late (on a busy machine), the caller parses its piece too instead of
// waiting for it. Each piece's tree-sitter tree is freed after its nodes
// are handed over, by the helpers when they can, off the caller's path.
type splitRun struct {
	ctx  context.Context
	code []byte
	at   []int
	ws   [splitMaxPieces]*worker
	errs [splitMaxPieces]error
	bad  [splitMaxPieces]bool // the piece has an ERROR or MISSING node
	k    int                  // pieces
	mem  int64                // the whole input's memory budget, 0 for none

	next    atomic.Int32 // the next piece to claim
	wg      sync.WaitGroup
	handoff atomic.Pointer[[]tsparse.Tree] // the caller's trees, or takenTrees
}

// takenTrees marks splitRun.handoff as taken by a helper.
var takenTrees = new([]tsparse.Tree)

func (s *splitRun) help() {
	var buf [splitMaxPieces]tsparse.Tree
	for _, t := range s.run(buf[:0]) {
		t.Free()
	}
	if p := s.handoff.Swap(takenTrees); p != nil && p != takenTrees {
		for _, t := range *p {
			t.Free()
		}
	}
}

// run parses pieces until none is left and returns their trees.
func (s *splitRun) run(trees []tsparse.Tree) []tsparse.Tree {
	for {
		i := int(s.next.Add(1)) - 1
		if i >= s.k {
			return trees
		}
		trees = append(trees, s.piece(i))
		s.wg.Done()
	}
}

func (s *splitRun) piece(i int) tsparse.Tree {
	lo, hi := 0, len(s.code)
	if i > 0 {
		lo = s.at[i-1]
	}
	if i < len(s.at) {
		hi = s.at[i]
	}
	w := s.ws[i]
	if s.mem > 0 {
		share := max(1, s.mem*int64(hi-lo)/int64(len(s.code)))
		keep := w.p.MemBudget
		w.p.MemBudget = func(int) int64 { return share }
		defer func() { w.p.MemBudget = keep }()
	}
	nodes, t, err := w.p.ParseKeep(s.ctx, s.code[lo:hi], w.buf)
	if err == nil {
		w.buf = nodes
		s.bad[i] = tsparse.HasError(nodes)
	}
	s.errs[i] = err
	return t
}
