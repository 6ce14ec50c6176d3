package safety

import (
	"context"
	"strings"
	"sync"

	python "github.com/tree-sitter/tree-sitter-python/bindings/go"

	"github.com/codeagent/codeagent/safety/internal/tsparse"
)

// Python node kinds the rules look at.
const (
	pyModule kind = firstLanguageKind + iota
	pyImport
	pyImportFrom
	pyFutureImport
	pyAliasedImport
	pyDottedName
	pyRelativeImport
	pyWildcard
	pyIdentifier
	pyAttribute
	pyCall
	pyArgumentList
	pyKeywordArgument
	pyString
	pyStringStart
	pyStringContent
	pyInterpolation
	pyConcatString
	pyBinaryOp
	pyParenExpr
	pyFunctionDef
	pyClassDef
	pyLambda
	pyParameters
	pyLambdaParameters
	pyDefaultParameter
	pyTypedParameter
	pyTypedDefaultParameter
	pyListSplatPattern
	pyDictSplatPattern
	pyListSplat
	pyDictSplat
	pyPatternList
	pyTuplePattern
	pyListPattern
	pyTuple
	pyList
	pyAsPatternTarget
	pyAssignment
	pyAugAssignment
	pyFor
	pyForIn
	pyWhile
	pyTrue
	pyInteger
	pyBreak
	pyReturn
	pyRaise
	pyYield
	pyExecStatement
	pyGlobal
	pyNonlocal
	pyNamedExpr
	// For lint.
	pyListComp
	pySetComp
	pyDictComp
	pyGenExpr
	pyCasePattern
	pyType
	pyTypeParameter
	pyTypeAlias
	pyTry
	pyExcept
	pyBlock
	pyFloat
	pyComparison
	pyIsOp
	pyIsNotOp
	// For the environment rules.
	pySubscript
	pyDelete
)

var pyKindNames = map[string]kind{
	"module": pyModule, "import_statement": pyImport, "import_from_statement": pyImportFrom,
	"future_import_statement": pyFutureImport, "aliased_import": pyAliasedImport,
	"dotted_name": pyDottedName, "relative_import": pyRelativeImport, "wildcard_import": pyWildcard,
	"identifier": pyIdentifier, "attribute": pyAttribute, "call": pyCall,
	"argument_list": pyArgumentList, "keyword_argument": pyKeywordArgument, "string": pyString,
	"string_start": pyStringStart, "string_content": pyStringContent,
	"interpolation": pyInterpolation, "concatenated_string": pyConcatString,
	"binary_operator": pyBinaryOp, "parenthesized_expression": pyParenExpr,
	"function_definition": pyFunctionDef, "class_definition": pyClassDef, "lambda": pyLambda,
	"parameters": pyParameters, "lambda_parameters": pyLambdaParameters,
	"default_parameter": pyDefaultParameter, "typed_parameter": pyTypedParameter,
	"typed_default_parameter": pyTypedDefaultParameter,
	"list_splat_pattern":      pyListSplatPattern, "dictionary_splat_pattern": pyDictSplatPattern,
	"list_splat": pyListSplat, "dictionary_splat": pyDictSplat,
	"pattern_list": pyPatternList, "tuple_pattern": pyTuplePattern, "list_pattern": pyListPattern,
	"tuple": pyTuple, "list": pyList, "as_pattern_target": pyAsPatternTarget,
	"assignment": pyAssignment, "augmented_assignment": pyAugAssignment,
	"for_statement": pyFor, "for_in_clause": pyForIn, "while_statement": pyWhile,
	"true": pyTrue, "integer": pyInteger, "break_statement": pyBreak,
	"return_statement": pyReturn, "raise_statement": pyRaise, "yield": pyYield,
	"exec_statement": pyExecStatement, "global_statement": pyGlobal,
	"nonlocal_statement": pyNonlocal, "named_expression": pyNamedExpr,
	"list_comprehension": pyListComp, "set_comprehension": pySetComp,
	"dictionary_comprehension": pyDictComp, "generator_expression": pyGenExpr,
	"case_pattern": pyCasePattern, "type": pyType, "type_parameter": pyTypeParameter,
	"type_alias_statement": pyTypeAlias, "try_statement": pyTry, "except_clause": pyExcept,
	"block": pyBlock, "float": pyFloat, "comparison_operator": pyComparison,
	"'is": pyIsOp, "'is not": pyIsNotOp,
	"subscript": pySubscript, "delete_statement": pyDelete,
}

var pyFieldNames = []string{
	"name", "alias", "module_name", "function", "arguments", "object", "attribute",
	"value", "left", "right", "operator", "condition", "body", "parameters", "subscript",
}

var pyGrammarOnce = sync.OnceValue(func() *grammar {
	return newGrammar(python.Language(), pyKindNames, pyFieldNames)
})

func pythonGrammar() *grammar { return pyGrammarOnce() }

// pyFields caches the field ids.
type pyFields struct {
	name, alias, moduleName, function, arguments, object, attribute,
	value, left, right, operator, condition, body, parameters, subscript uint16
}

// pyAnalyser holds the policy compiled into sets for the Python rules.
type pyAnalyser struct {
	pool           *parserPool
	split          func([]byte) []int // where to cut a file for a parallel parse
	policy         *Policy
	f              pyFields
	builtins       set
	shadowable     set
	allowedDunders set
	introspection  []string
	frames         set
	deser          map[string]*Deserializer
	fileFuncs      set
	filePrefixes   []string
	forbiddenRoots set
	reexports      map[string]string // function name -> the module it stands for
	// Forbidden functions of allowed modules (os.system, "os.exec*"), the
	// modules they belong to (os, sys), calls naming files by qualified
	// name (os.rename), and the environment variables programs may read.
	funcs        set
	funcPrefixes []string
	restricted   set
	fileQual     set
	envNames     set
	envHint      string
	// Filters for the sets looked up for every identifier or attribute.
	builtinsF, shadowableF, framesF, dynImportF, forbiddenRootsF, reexportsF nameFilter
}

func newPythonAnalyser(p *Policy, pool *parserPool) *pyAnalyser {
	g := pool.g
	a := &pyAnalyser{
		pool:   pool,
		split:  pySplit,
		policy: p,
		f: pyFields{
			name: g.field("name"), alias: g.field("alias"), moduleName: g.field("module_name"),
			function: g.field("function"), arguments: g.field("arguments"),
			object: g.field("object"), attribute: g.field("attribute"), value: g.field("value"),
			left: g.field("left"), right: g.field("right"), operator: g.field("operator"),
			condition: g.field("condition"), body: g.field("body"), parameters: g.field("parameters"),
			subscript: g.field("subscript"),
		},
		builtins:       newSet(p.Python.ForbiddenBuiltins),
		shadowable:     newSet([]string{"input", "vars"}),
		allowedDunders: newSet(p.Python.AllowedDunders),
		introspection:  p.Python.IntrospectionNames,
		frames:         newSet(p.Python.FrameAttributes),
		deser:          map[string]*Deserializer{},
		fileFuncs:      set{},
		forbiddenRoots: set{},
		reexports:      map[string]string{},
		funcs:          set{},
		restricted:     set{},
		fileQual:       set{},
		envNames:       environmentNames(p, "python"),
		envHint:        envHint(p, `os.environ.get("HOME")`),
	}
	for _, fn := range p.Python.ForbiddenFunctions {
		if prefix, ok := strings.CutSuffix(fn, "*"); ok {
			a.funcPrefixes = append(a.funcPrefixes, prefix)
		} else {
			a.funcs[fn] = true
		}
		a.restricted[rootOf(fn)] = true
	}
	for i := range p.Python.Deserializers {
		d := &p.Python.Deserializers[i]
		a.deser[d.Call] = d
	}
	for _, f := range p.Python.FileFunctions {
		if strings.Contains(f, ".") {
			a.fileQual[f] = true
		} else if prefix, ok := strings.CutSuffix(f, "*"); ok {
			a.filePrefixes = append(a.filePrefixes, prefix)
		} else {
			a.fileFuncs[f] = true
		}
	}
	for _, m := range p.Python.ForbiddenModules {
		a.forbiddenRoots[rootOf(m)] = true
	}
	for m := range a.restricted {
		a.forbiddenRoots[m] = true // reached through another module: tempfile.os
	}
	reexported := set{}
	for _, r := range p.Python.ReexportedFunctions {
		a.reexports[r.Name] = r.Module
		reexported[r.Name] = true
	}
	a.reexportsF = newNameFilter(reexported)
	a.builtinsF = newNameFilter(a.builtins)
	a.shadowableF = newNameFilter(a.shadowable)
	a.framesF = newNameFilter(a.frames)
	a.dynImportF = newNameFilter(dynamicImportAttrs)
	a.forbiddenRootsF = newNameFilter(a.forbiddenRoots)
	return a
}

// pyFile is the state of one Python check.
type pyFile struct {
	*pyAnalyser
	t   *tree
	out *collector
	// aliases maps a local name bound by an import to the qualified name it
	// stands for: "np" -> "numpy", "rp" -> "pandas.read_pickle".
	aliases  map[string]string
	aliasesF nameFilter
	// bound holds the shadowable builtin names the file binds itself.
	bound set
	// restrictedUse: an import binds a module with forbidden functions
	// (os, sys), so that their rules apply (skipped otherwise).
	restrictedUse bool
}

func (a *pyAnalyser) analyse(ctx context.Context, code []byte, out *collector) error {
	t, release, err := a.pool.parseCut(ctx, code, a.split)
	if err != nil {
		return err
	}
	defer release()
	f := &pyFile{pyAnalyser: a, t: t, out: out, aliases: map[string]string{}, bound: set{}}
	t.reportSyntaxErrors(out, "fix the syntax at this line; the code must run under Python 3")
	f.collectBindings()
	for i := int32(0); i < int32(len(t.nodes)); i++ {
		if i&0xFFF == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		switch t.kind(i) {
		case pyImport, pyImportFrom:
			f.checkImport(i)
		case pyIdentifier:
			f.checkName(i)
		case pyAttribute:
			f.checkAttribute(i)
		case pyCall:
			f.checkCall(i)
		case pyString:
			f.checkString(i)
		case pyConcatString:
			f.checkConcat(i)
		case pyWhile:
			f.checkLoop(i)
		case pyExecStatement:
			s, e := t.span(i)
			out.add(RuleForbiddenBuiltin, s, e, "exec statement runs a string as code",
				builtinHint("exec"))
		}
	}
	if out.lint != nil && !tsparse.HasError(t.nodes) {
		f.lint()
	}
	return nil
}

// collectBindings fills the alias table from every import (imports may come
// after their use inside functions) and records shadowable builtins that the
// file binds.
func (f *pyFile) collectBindings() {
	t := f.t
	for i := int32(0); i < int32(len(t.nodes)); i++ {
		switch t.kind(i) {
		case pyImport:
			for c := t.node(i).FirstChild; c >= 0; c = t.node(c).NextSibling {
				switch t.kind(c) {
				case pyDottedName:
					m := f.dotted(c)
					f.setAlias(rootOf(m), rootOf(m))
				case pyAliasedImport:
					m := f.dotted(t.child(c, f.f.name))
					if al := t.child(c, f.f.alias); al >= 0 {
						f.setAlias(normIdent(t.text(al)), m)
					}
				}
			}
		case pyImportFrom:
			mod := t.child(i, f.f.moduleName)
			if t.kind(mod) != pyDottedName {
				continue // relative: a workspace module
			}
			m := f.dotted(mod)
			for c := t.node(i).FirstChild; c >= 0; c = t.node(c).NextSibling {
				if t.fieldOf(c) != f.f.name {
					continue
				}
				switch t.kind(c) {
				case pyDottedName:
					n := f.dotted(c)
					f.setAlias(rootOf(n), m+"."+n)
				case pyAliasedImport:
					n := f.dotted(t.child(c, f.f.name))
					if al := t.child(c, f.f.alias); al >= 0 {
						f.setAlias(normIdent(t.text(al)), m+"."+n)
					}
				}
			}
		case pyIdentifier:
			name := normIdent(t.text(i))
			if f.shadowableF.mayHave(name) && f.shadowable[name] && f.isBinding(i) {
				f.bound[name] = true
			}
		}
	}
}

func (f *pyFile) setAlias(name, qualified string) {
	f.aliases[name] = qualified
	f.aliasesF.add(name)
	if f.restricted[rootOf(qualified)] {
		f.restrictedUse = true
	}
}

// alias returns what an imported name stands for.
func (f *pyFile) alias(name string) (string, bool) {
	if !f.aliasesF.mayHave(name) {
		return "", false
	}
	q, ok := f.aliases[name]
	return q, ok
}

// dotted returns a dotted_name's normalised text, without spaces or comments.
func (f *pyFile) dotted(i int32) string {
	t := f.t
	if t.kind(i) == pyIdentifier {
		return normIdent(t.text(i))
	}
	// One identifier needs no copy; otherwise size the result first.
	var partsBuf [8]string
	parts := partsBuf[:0]
	size := 0
	for c := t.firstNamed(i); c >= 0; c = t.nextNamed(c) {
		if t.kind(c) != pyIdentifier {
			continue
		}
		p := normIdent(t.text(c))
		if p == "" && len(parts) == 0 {
			continue // no dot before the first text
		}
		parts = append(parts, p)
		size += len(p) + 1
	}
	switch len(parts) {
	case 0:
		return ""
	case 1:
		return parts[0]
	}
	var b strings.Builder
	b.Grow(size - 1)
	for k, p := range parts {
		if k > 0 {
			b.WriteByte('.')
		}
		b.WriteString(p)
	}
	return b.String()
}

// identRole says what an identifier occurrence is.
type identRole uint8

const (
	roleReference  identRole = iota // reads a variable
	roleBinding                     // a parameter, definition name or import alias
	roleAttribute                   // x.NAME: checked with the attribute
	roleKeyword                     // f(NAME=...)
	roleImportPath                  // part of an import's module path
)

func (f *pyFile) role(i int32) identRole {
	t := f.t
	p := t.parent(i)
	field := t.fieldOf(i)
	switch t.kind(p) {
	case pyAttribute:
		if field == f.f.attribute {
			return roleAttribute
		}
	case pyKeywordArgument:
		if field == f.f.name {
			return roleKeyword
		}
	case pyDottedName, pyRelativeImport:
		return roleImportPath
	case pyAliasedImport:
		if field == f.f.alias {
			return roleBinding
		}
	case pyFunctionDef, pyClassDef:
		if field == f.f.name {
			return roleBinding
		}
	case pyParameters, pyLambdaParameters, pyListSplatPattern, pyDictSplatPattern, pyGlobal, pyNonlocal:
		return roleBinding
	case pyDefaultParameter, pyTypedDefaultParameter:
		if field == f.f.name {
			return roleBinding
		}
	case pyTypedParameter:
		if field == 0 {
			return roleBinding
		}
	case pyImportFrom:
		return roleImportPath
	}
	return roleReference
}

// isBinding reports whether identifier i is assigned to: a parameter or
// definition name, an assignment or loop target, a walrus or an "as" name.
func (f *pyFile) isBinding(i int32) bool {
	t := f.t
	if f.role(i) == roleBinding {
		return true
	}
	for c := i; ; {
		p := t.parent(c)
		switch t.kind(p) {
		case pyPatternList, pyTuplePattern, pyListPattern, pyListSplatPattern, pyTuple, pyList, pyParenExpr:
			c = p
			continue
		case pyAssignment, pyAugAssignment, pyFor, pyForIn:
			return t.fieldOf(c) == f.f.left
		case pyNamedExpr:
			return t.fieldOf(c) == f.f.name
		case pyAsPatternTarget:
			return true
		}
		return false
	}
}

func (f *pyFile) add(rule string, i int32, msg, hint string) {
	s, e := f.t.span(i)
	f.out.add(rule, s, e, msg, hint)
}

// qualified returns the qualified name an expression stands for when it is
// a name or a chain of attributes on one, resolving import aliases:
// np.load -> numpy.load. It returns "" for anything else. module reports
// whether the chain starts at an imported name.
func (f *pyFile) qualified(i int32) (q string, module bool) {
	t := f.t
	var partsBuf [8]string
	parts := partsBuf[:0]
	size := 0
	for {
		switch t.kind(i) {
		case pyAttribute:
			p := normIdent(t.text(t.child(i, f.f.attribute)))
			parts = append(parts, p)
			size += 1 + len(p)
			i = t.child(i, f.f.object)
			continue
		case pyIdentifier:
			root := normIdent(t.text(i))
			if m, ok := f.alias(root); ok {
				root, module = m, true
			}
			if len(parts) == 0 {
				return root, module
			}
			var b strings.Builder
			b.Grow(len(root) + size)
			b.WriteString(root)
			for k := len(parts) - 1; k >= 0; k-- {
				b.WriteByte('.')
				b.WriteString(parts[k])
			}
			return b.String(), module
		case pyParenExpr:
			i = t.firstNamed(i)
			continue
		}
		return "", false
	}
}
