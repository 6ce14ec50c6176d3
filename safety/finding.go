package safety

import (
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"
)

// Finding is one reason why the code is not safe to run as written, or,
// with Kind KindLint, a warning about a likely bug (an undefined name, an
// unused import) that never stops the code from running.
type Finding struct {
	Rule    string `json:"rule"`           // stable id, e.g. forbidden-import
	Line    int    `json:"line"`           // 1-based
	Column  int    `json:"column"`         // 1-based, in characters
	Text    string `json:"text"`           // the offending source text (first line, shortened)
	Message string `json:"message"`        // what is wrong, one line
	Hint    string `json:"hint"`           // what to write instead, one line
	Kind    string `json:"kind,omitempty"` // "" for a safety finding, KindLint for a warning
}

// KindLint marks a lint warning: reported, never a reason not to run.
const KindLint = "lint"

func (f Finding) String() string {
	return fmt.Sprintf("%d:%d %s %s", f.Line, f.Column, f.Rule, f.Message)
}

// Report is the result of checking one input. Findings make it unsafe;
// Lint holds the lint warnings (Kind KindLint), which do not.
type Report struct {
	Language Language  `json:"language"`
	Findings []Finding `json:"findings"`
	Lint     []Finding `json:"lint,omitempty"`
}

// Safe reports whether the check found nothing (lint warnings aside).
func (r Report) Safe() bool { return len(r.Findings) == 0 }

// Rule ids. They are part of the output format: do not rename them.
const (
	RuleSyntaxError         = "syntax-error"
	RuleInputTooLarge       = "input-too-large"
	RuleFindingLimit        = "finding-limit"
	RuleForbiddenImport     = "forbidden-import"
	RuleImportNotAllowed    = "import-not-allowed"
	RuleDynamicImport       = "dynamic-import"
	RuleForbiddenBuiltin    = "forbidden-builtin"
	RuleIntrospection       = "introspection"
	RuleFrameAccess         = "frame-access"
	RuleDynamicAttribute    = "dynamic-attribute"
	RuleGetattrAsValue      = "getattr-as-value"
	RulePrivateAttribute    = "private-module-attribute"
	RuleModuleReexport      = "module-reexport"
	RuleFormatTraversal     = "format-string-traversal"
	RuleDeserialization     = "deserialization"
	RulePathOutside         = "path-outside-workspace"
	RuleUnboundedLoop       = "unbounded-loop"
	RuleNetworkAccess       = "network-access"
	RuleEnvironmentAccess   = "environment-access"
	RuleConstructorAccess   = "constructor-access"
	RuleDynamicGlobal       = "dynamic-global"
	RuleForbiddenCommand    = "forbidden-command"
	RuleDynamicCommand      = "dynamic-command"
	RuleForbiddenGlobalJS   = "forbidden-global"
	RuleProcessAccess       = "process-access"
	RuleNestedShellTooDeep  = "nested-shell"
	RuleUnsupportedLanguage = "unsupported-language"
	RuleForbiddenFunction   = "forbidden-function"
	RuleModuleAsValue       = "module-as-value"

	// Lint rules (Kind KindLint).
	RuleUndefinedName    = "undefined-name"
	RuleUnusedImport     = "unused-import"
	RuleRedefinedUnused  = "redefined-unused"
	RuleFStringNoField   = "fstring-missing-placeholders"
	RuleIsLiteral        = "is-literal"
	RuleUndeclaredGlobal = "undeclared-global"
)

// ruleCatalog describes each rule in one line; it is what `disable` accepts
// and what the documentation lists.
var ruleCatalog = map[string]string{
	RuleSyntaxError:         "the code does not parse (or is not valid UTF-8)",
	RuleInputTooLarge:       "the input is larger than max_input_bytes, or its syntax tree outgrew the memory budget (parse_memory_per_byte): not checked",
	RuleFindingLimit:        "more findings than max_findings; the rest are counted",
	RuleForbiddenImport:     "import of a forbidden module, in any form",
	RuleImportNotAllowed:    "allow mode: import of a module not in allowed_modules",
	RuleDynamicImport:       "importing by computed name (importlib.import_module, require(x), import(x))",
	RuleForbiddenBuiltin:    "any reference to a forbidden builtin (exec, eval, ...), not only calls",
	RuleIntrospection:       "dunder names and attributes used for introspection (__class__, __globals__, ...)",
	RuleFrameAccess:         "frame, traceback and code-object attributes (gi_frame, f_back, tb_frame, ...)",
	RuleDynamicAttribute:    "getattr/setattr/delattr/attrgetter with a computed or dunder name",
	RuleGetattrAsValue:      "getattr, setattr or delattr passed around as a value",
	RulePrivateAttribute:    "a private attribute (_name) of an imported module",
	RuleModuleReexport:      "a forbidden module reached as an attribute of another module",
	RuleFormatTraversal:     "a format string that walks attributes (\"{0.__class__}\".format)",
	RuleDeserialization:     "loading data with a deserializer that can run code (pickle, ...)",
	RulePathOutside:         "a file path outside the workspace (absolute, ~ or ..)",
	RuleUnboundedLoop:       "a while-true loop with no break, return or raise",
	RuleNetworkAccess:       "network access (fetch, curl, /dev/tcp, ...)",
	RuleEnvironmentAccess:   "reading the environment other than a variable the run passes, by name (environment_names)",
	RuleConstructorAccess:   "reaching Function through .constructor",
	RuleDynamicGlobal:       "computed property access on the global object",
	RuleForbiddenCommand:    "a forbidden shell command",
	RuleDynamicCommand:      "a shell command whose name is computed",
	RuleForbiddenGlobalJS:   "any reference to a forbidden JavaScript global (eval, Function, ...)",
	RuleProcessAccess:       "a forbidden property of process (binding, dlopen, kill, ...)",
	RuleNestedShellTooDeep:  "shell code nested in sh -c deeper than the checker follows",
	RuleUnsupportedLanguage: "the language is not supported",
	RuleForbiddenFunction:   "any reference to a forbidden function of an allowed module or package (os.system, sys.modules, Go's os.StartProcess, ...)",
	RuleModuleAsValue:       "a module with forbidden functions (os, sys) bound, passed or returned as a value, which hides what is called on it",

	RuleUndefinedName:    "lint, Python: a name no scope defines and no builtin has",
	RuleUnusedImport:     "lint, Python: an import whose name is never used (nor listed in __all__)",
	RuleRedefinedUnused:  "lint, Python: a function or class defined again before the first is used",
	RuleFStringNoField:   "lint, Python: an f-string without {} fields",
	RuleIsLiteral:        "lint, Python: is / is not compared with a str or number literal",
	RuleUndeclaredGlobal: "lint, JavaScript: a variable no declaration in the file names and node does not define",
}

// Rules returns the rule ids with their one-line descriptions, sorted by id.
func Rules() [][2]string {
	out := make([][2]string, 0, len(ruleCatalog))
	for id, d := range ruleCatalog {
		out = append(out, [2]string{id, d})
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0] < out[j][0] })
	return out
}

// maxTextLen bounds Finding.Text so hostile input cannot bloat reports.
const maxTextLen = 80

// collector gathers findings for one input, resolving byte offsets to lines
// and columns lazily, deduplicating, and enforcing the policy's limits.
type collector struct {
	src      []byte
	policy   *Policy
	lines    []int // byte offset of each line start, built on first use
	seen     map[[3]int]int
	findings []Finding
	dropped  int
	limit    int
	// lint collects the lint warnings, apart; nil when lint is off.
	lint *collector
}

func newCollector(src []byte, p *Policy) *collector {
	limit := p.MaxFindings
	if limit == 0 {
		limit = 100
	}
	return &collector{src: src, policy: p, limit: limit}
}

// add records a finding for the source range [start, end).
func (c *collector) add(rule string, start, end int, msg, hint string) {
	if c.policy.disabled(rule) {
		return
	}
	line, col := c.position(start)
	if c.seen == nil {
		c.seen = make(map[[3]int]int)
	}
	key := [3]int{line, col, ruleIndex(rule)}
	if _, dup := c.seen[key]; dup {
		return
	}
	if len(c.findings) >= c.limit {
		c.dropped++
		return
	}
	c.seen[key] = len(c.findings)
	// msg and hint may contain source text, which the analysers read
	// without copying (tree.text): copy them, as snippet copies Text.
	c.findings = append(c.findings, Finding{
		Rule: rule, Line: line, Column: col,
		Text: snippet(c.src, start, end), Message: strings.Clone(msg), Hint: strings.Clone(hint),
	})
}

// lintResult returns the lint findings, marked with KindLint, or nil.
func (c *collector) lintResult() []Finding {
	if c == nil || (len(c.findings) == 0 && c.dropped == 0) {
		return nil
	}
	out := c.result()
	for i := range out {
		out[i].Kind = KindLint
	}
	return out
}

// result returns the findings sorted by position, with the limit summary.
func (c *collector) result() []Finding {
	out := c.findings
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Line != out[j].Line {
			return out[i].Line < out[j].Line
		}
		if out[i].Column != out[j].Column {
			return out[i].Column < out[j].Column
		}
		return out[i].Rule < out[j].Rule
	})
	if c.dropped > 0 {
		out = append(out, Finding{
			Rule: RuleFindingLimit, Line: 1, Column: 1,
			Message: fmt.Sprintf("%d more findings not shown", c.dropped),
			Hint:    "fix the findings above first; the same patterns repeat further down",
		})
	}
	if out == nil {
		out = []Finding{}
	}
	return out
}

var ruleIndexes = func() map[string]int {
	m := make(map[string]int, len(ruleCatalog))
	for i, r := range Rules() {
		m[r[0]] = i
	}
	return m
}()

func ruleIndex(rule string) int { return ruleIndexes[rule] }

// position converts a byte offset to a 1-based line and character column.
func (c *collector) position(off int) (int, int) {
	if off > len(c.src) {
		off = len(c.src)
	}
	if off < 0 {
		off = 0
	}
	if c.lines == nil {
		c.lines = append(c.lines, 0)
		for i, b := range c.src {
			if b == '\n' {
				c.lines = append(c.lines, i+1)
			}
		}
	}
	i := sort.Search(len(c.lines), func(i int) bool { return c.lines[i] > off }) - 1
	start := c.lines[i]
	return i + 1, utf8.RuneCount(c.src[start:off]) + 1
}

// snippet returns the first line of src[start:end], valid UTF-8, shortened.
func snippet(src []byte, start, end int) string {
	if start < 0 || start > len(src) {
		return ""
	}
	if end > len(src) {
		end = len(src)
	}
	if end < start {
		end = start
	}
	s := src[start:end]
	if i := strings.IndexAny(string(s[:min(len(s), 4*maxTextLen)]), "\r\n"); i >= 0 {
		s = s[:i]
	}
	if len(s) > 4*maxTextLen {
		s = s[:4*maxTextLen]
	}
	t := strings.ToValidUTF8(string(s), "\uFFFD")
	if utf8.RuneCountInString(t) > maxTextLen {
		r := []rune(t)
		t = string(r[:maxTextLen-1]) + "…"
	}
	return strings.TrimSpace(t)
}
