package safety

import (
	"fmt"
	"strings"
)

// Python lint: pyflakes' most useful checks on the tree the rules already
// parsed. Names resolve by Python's scoping (module, class bodies not seen
// from their methods, functions, lambdas, comprehensions whose first
// iterable belongs to the enclosing scope; global, nonlocal, walrus), but
// flow-insensitively: a binding anywhere in a scope counts, so a use before
// the assignment is not reported. That errs towards silence, as warnings the
// model reads should.

// pyBuiltins are the names of Python 3.11's builtins module, with the
// module attributes every module has.
var pyBuiltins = newSet(strings.Fields(`
ArithmeticError AssertionError AttributeError BaseException BaseExceptionGroup BlockingIOError
BrokenPipeError BufferError BytesWarning ChildProcessError ConnectionAbortedError ConnectionError
ConnectionRefusedError ConnectionResetError DeprecationWarning EOFError Ellipsis EncodingWarning
EnvironmentError Exception ExceptionGroup False FileExistsError FileNotFoundError FloatingPointError
FutureWarning GeneratorExit IOError ImportError ImportWarning IndentationError IndexError InterruptedError
IsADirectoryError KeyError KeyboardInterrupt LookupError MemoryError ModuleNotFoundError NameError None
NotADirectoryError NotImplemented NotImplementedError OSError OverflowError PendingDeprecationWarning
PermissionError ProcessLookupError RecursionError ReferenceError ResourceWarning RuntimeError RuntimeWarning
StopAsyncIteration StopIteration SyntaxError SyntaxWarning SystemError SystemExit TabError TimeoutError True
TypeError UnboundLocalError UnicodeDecodeError UnicodeEncodeError UnicodeError UnicodeTranslateError
UnicodeWarning UserWarning ValueError Warning ZeroDivisionError __build_class__ __debug__ __doc__ __import__
__loader__ __name__ __package__ __spec__ abs aiter all anext any ascii bin bool breakpoint bytearray bytes
callable chr classmethod compile complex copyright credits delattr dict dir divmod enumerate eval exec exit
filter float format frozenset getattr globals hasattr hash help hex id input int isinstance issubclass iter
len license list locals map max memoryview min next object oct open ord pow print property quit range repr
reversed round set setattr slice sorted staticmethod str sum super tuple type vars zip
__file__ __builtins__ __annotations__ __path__ __cached__ __class__ __module__ __qualname__ WindowsError`))

// pyDynamicNames make a module's names unknowable: undefined-name is off
// in a module that refers to one of them.
var pyDynamicNames = set{"exec": true, "eval": true, "globals": true, "locals": true, "vars": true,
	"__builtins__": true, "__import__": true, "__dict__": true}

// Node flags, inherited by a node's subtree.
const (
	flagPattern    uint8 = 1 << iota // in a match case pattern
	flagAnnotation                   // in a type annotation
	flagNameError                    // in the body of a try that catches NameError
)

type pyScopeKind uint8

const (
	scModule pyScopeKind = iota
	scClass
	scFunction
	scComprehension
)

type pyScope struct {
	kind     pyScopeKind
	parent   int32
	firstFor int32 // a comprehension's first for_in_clause
}

// scopedName is a name bound in one scope.
type scopedName struct {
	scope int32
	name  string
}

type pyImportBinding struct {
	key  scopedName
	at   int32  // the imported name's node
	what string // as pyflakes says it: "os.path", "numpy as np", "typing.List"
}

type pyRef struct {
	at    int32
	scope int32
	name  string
	soft  bool // a match pattern's name: marks imports used, never reported
}

// pyLint is the state of one file's lint.
type pyLint struct {
	*pyFile
	scopes   []pyScope
	scopeOf  []int32            // per node: the scope its names resolve in
	inner    []int32            // per node: the scope it opens, or -1
	flags    []uint8            // per node: flagPattern, flagAnnotation, flagNameError
	bound    map[scopedName]int // how many bindings
	used     map[scopedName]bool
	imports  []pyImportBinding
	refs     []pyRef
	exported set                // names in __all__ and in string annotations
	idents   map[string][]int32 // identifiers by name, in order (see usedBetween)
	dynamic  bool
}

// lintPython adds the Python lint warnings for a tree without syntax errors.
func (f *pyFile) lint() {
	t := f.t
	n := len(t.nodes)
	l := &pyLint{pyFile: f, scopes: []pyScope{{kind: scModule, parent: -1, firstFor: -1}},
		scopeOf: make([]int32, n), inner: make([]int32, n), flags: make([]uint8, n),
		bound: map[scopedName]int{}, used: map[scopedName]bool{}, exported: set{}}
	l.inner[0] = -1
	for i := int32(1); i < int32(n); i++ {
		l.visit(i)
	}
	l.resolve()
	l.redefinitions()
}

// visit assigns node i its scope and records what it binds or uses. Nodes
// come in pre-order, so a parent's scope is known.
func (l *pyLint) visit(i int32) {
	t := l.t
	p := t.parent(i)
	s := l.scopeOf[p]
	l.inner[i] = -1
	l.flags[i] = l.flags[p]
	if t.kind(p) == pyTry && t.fieldOf(i) == l.f.body && l.catchesNameError(p) {
		l.flags[i] |= flagNameError
	}
	switch in := l.inner[p]; {
	case in < 0:
	case l.scopes[in].kind == scComprehension:
		s = in
	case t.fieldOf(i) == l.f.body:
		s = in
	}
	if t.kind(p) == pyForIn && t.fieldOf(i) == l.f.right {
		if c := t.parent(p); l.inner[c] >= 0 && l.scopes[l.inner[c]].firstFor == p {
			s = l.scopeOf[c] // the first iterable runs in the enclosing scope
		}
	}
	l.scopeOf[i] = s
	switch t.kind(i) {
	case pyFunctionDef, pyLambda:
		l.open(i, scFunction)
	case pyClassDef:
		l.open(i, scClass)
	case pyListComp, pySetComp, pyDictComp, pyGenExpr:
		c := l.open(i, scComprehension)
		for k := t.node(i).FirstChild; k >= 0; k = t.node(k).NextSibling {
			if t.kind(k) == pyForIn {
				l.scopes[c].firstFor = k
				break
			}
		}
	case pyCasePattern:
		l.flags[i] |= flagPattern
	case pyImport, pyImportFrom:
		l.importStatement(i, s)
	case pyWildcard:
		l.dynamic = true
	case pyAssignment, pyAugAssignment:
		if s == 0 && t.text(t.child(i, l.f.left)) == "__all__" {
			l.strings(t.child(i, l.f.right))
		}
	case pyType:
		l.flags[i] |= flagAnnotation
	case pyStringContent:
		if l.flags[i]&flagAnnotation != 0 {
			l.words(i) // string annotations name what they use
		}
	case pyString:
		l.fstring(i)
	case pyComparison:
		l.isLiteral(i)
	case pyIdentifier:
		l.identifier(i, p, s)
	}
}

func (l *pyLint) open(i int32, k pyScopeKind) int32 {
	id := int32(len(l.scopes))
	l.scopes = append(l.scopes, pyScope{kind: k, parent: l.scopeOf[i], firstFor: -1})
	l.inner[i] = id
	return id
}

// strings adds the words of the string literals under i to exported.
func (l *pyLint) strings(i int32) {
	if i < 0 {
		return
	}
	t := l.t
	for j := i; j < t.end(i); j++ {
		if t.kind(j) == pyStringContent {
			l.words(j)
		}
	}
}

// words adds the words of string content i to exported.
func (l *pyLint) words(i int32) {
	for _, w := range strings.FieldsFunc(l.t.text(i), func(r rune) bool {
		return !(r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= 0x80)
	}) {
		l.exported[w] = true
	}
}

// importStatement binds the names an import statement imports in scope s.
func (l *pyLint) importStatement(i, s int32) {
	t := l.t
	module := ""
	if t.kind(i) == pyImportFrom {
		m := t.child(i, l.f.moduleName)
		module = strings.Join(strings.Fields(t.text(m)), "")
		if !strings.HasSuffix(module, ".") {
			module += "."
		}
	}
	for c := t.node(i).FirstChild; c >= 0; c = t.node(c).NextSibling {
		if t.fieldOf(c) != l.f.name {
			continue
		}
		var name, what string
		at := c
		switch t.kind(c) {
		case pyDottedName:
			full := l.dotted(c)
			name, what = rootOf(full), module+full
			if module != "" {
				name = full
			}
		case pyAliasedImport:
			al := t.child(c, l.f.alias)
			orig := l.dotted(t.child(c, l.f.name))
			name, what, at = normIdent(t.text(al)), module+orig+" as "+normIdent(t.text(al)), al
			if name == orig {
				what = "" // import x as x: an explicit re-export
			}
		default:
			continue
		}
		if name == "" {
			continue
		}
		if name == "builtins" {
			l.dynamic = true // it can add builtins
		}
		k := scopedName{s, name}
		l.bound[k]++
		if what != "" {
			l.imports = append(l.imports, pyImportBinding{key: k, at: at, what: what})
		}
	}
}

// identifier records a name's binding or use.
func (l *pyLint) identifier(i, p, s int32) {
	t := l.t
	name := normIdent(t.text(i))
	if l.flags[i]&flagPattern != 0 {
		l.bound[scopedName{s, name}]++
		l.refs = append(l.refs, pyRef{at: i, scope: s, name: name, soft: true})
		return
	}
	switch l.role(i) {
	case roleAttribute, roleKeyword, roleImportPath:
		return
	case roleBinding:
		switch t.kind(p) {
		case pyAliasedImport:
			return // bound by importStatement
		case pyGlobal:
			l.bound[scopedName{0, name}]++
		}
		if name == "__getattr__" && s == 0 {
			l.dynamic = true
		}
		l.bound[scopedName{l.paramScope(i, s), name}]++
		return
	}
	switch k := t.kind(p); {
	case k == pyType && t.kind(t.parent(p)) == pyTypeParameter && l.declaresType(t.parent(p)):
		l.bound[scopedName{s, name}]++
		return
	case k == pyType && t.kind(t.parent(p)) == pyTypeAlias && t.fieldOf(p) == l.f.left:
		l.bound[scopedName{s, name}]++
		return
	}
	if l.isBinding(i) {
		if t.kind(p) == pyNamedExpr {
			for s > 0 && l.scopes[s].kind == scComprehension {
				s = l.scopes[s].parent
			}
		}
		l.bound[scopedName{s, name}]++
		if t.kind(p) != pyAugAssignment {
			return
		}
	}
	l.refs = append(l.refs, pyRef{at: i, scope: s, name: name})
}

// declaresType reports whether type_parameter i declares type variables
// (def f[T]) rather than subscripting a generic (List[T]).
func (l *pyLint) declaresType(i int32) bool {
	switch l.t.kind(l.t.parent(i)) {
	case pyFunctionDef, pyClassDef, pyTypeAlias:
		return true
	}
	return false
}

// paramScope returns the scope a binding identifier binds in: a parameter's
// is its function's or lambda's, others' is s.
func (l *pyLint) paramScope(i, s int32) int32 {
	t := l.t
	for c := t.parent(i); c >= 0; c = t.parent(c) {
		switch t.kind(c) {
		case pyDefaultParameter, pyTypedParameter, pyTypedDefaultParameter, pyListSplatPattern, pyDictSplatPattern:
			continue
		case pyParameters, pyLambdaParameters:
			if in := l.inner[t.parent(c)]; in >= 0 {
				return in
			}
		}
		return s
	}
	return s
}

// maxScopeDepth bounds the scopes a lookup walks, so that hostile nesting
// costs linear time; CPython refuses much shallower nesting.
const maxScopeDepth = 200

// lookup returns the scope that binds name as seen from scope s, or -1.
// Class bodies are seen from themselves and from comprehensions directly
// in them (as pyflakes does), not from functions.
func (l *pyLint) lookup(s int32, name string) int32 {
	inComp := -1 // unknown
	for depth := 0; s >= 0; s, depth = l.scopes[s].parent, depth+1 {
		if depth > maxScopeDepth {
			return -2 // deeper than Python nests: do not guess
		}
		sc := &l.scopes[s]
		if sc.kind == scClass && inComp == 0 {
			continue
		}
		if l.bound[scopedName{s, name}] > 0 {
			return s
		}
		inComp = 0
		if sc.kind == scComprehension {
			inComp = 1
		}
	}
	return -1
}

// resolve reports undefined names and marks the imports used, then reports
// the unused ones.
func (l *pyLint) resolve() {
	for _, r := range l.refs {
		if pyDynamicNames[r.name] && !r.soft && l.lookup(r.scope, r.name) == -1 {
			l.dynamic = true
		}
	}
	for _, r := range l.refs {
		if r.soft { // a pattern's name may be a capture or a value
			for s, d := r.scope, 0; s >= 0 && d <= maxScopeDepth; s, d = l.scopes[s].parent, d+1 {
				l.used[scopedName{s, r.name}] = true
			}
			continue
		}
		if s := l.lookup(r.scope, r.name); s != -1 {
			if s >= 0 {
				l.used[scopedName{s, r.name}] = true
			}
			continue
		}
		if l.dynamic || pyBuiltins[r.name] || l.flags[r.at]&flagNameError != 0 {
			continue
		}
		l.lintAdd(RuleUndefinedName, r.at, fmt.Sprintf("undefined name '%s'", r.name),
			fmt.Sprintf("define or import %s before using it, or check the spelling", r.name))
	}
	for _, im := range l.imports {
		// Like pyflakes, leave alone an import bound again in its scope
		// (try: import x / except ImportError: x = None), a dunder, and
		// one in a class body (a class attribute).
		if l.used[im.key] || l.bound[im.key] > 1 || isDunder(im.key.name) || im.key.scope == 0 && l.exported[im.key.name] ||
			l.scopes[im.key.scope].kind == scClass {
			continue
		}
		l.lintAdd(RuleUnusedImport, im.at, fmt.Sprintf("'%s' imported but unused", im.what),
			"remove the import, or use the name")
	}
}

// catchesNameError reports whether try statement p has a handler that
// catches NameError (or everything).
func (l *pyLint) catchesNameError(p int32) bool {
	t := l.t
	for h := t.node(p).FirstChild; h >= 0; h = t.node(h).NextSibling {
		if t.kind(h) != pyExcept {
			continue
		}
		v := t.firstNamed(h)
		if v < 0 || t.kind(v) == pyBlock || strings.Contains(t.text(v), "NameError") {
			return true
		}
	}
	return false
}

func (l *pyLint) lintAdd(rule string, i int32, msg, hint string) {
	s, e := l.t.span(i)
	l.out.lint.add(rule, s, e, msg, hint)
}
