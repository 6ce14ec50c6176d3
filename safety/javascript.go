package safety

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"

	javascript "github.com/tree-sitter/tree-sitter-javascript/bindings/go"

	"github.com/codeagent/codeagent/internal/lazyre"
	"github.com/codeagent/codeagent/safety/internal/tsparse"
)

// JavaScript node kinds the rules look at.
const (
	jsIdentifier kind = firstLanguageKind + iota
	jsPropertyIdentifier
	jsMember
	jsSubscript
	jsCall
	jsNew
	jsImportKeyword
	jsImportStatement
	jsExportStatement
	jsString
	jsStringFragment
	jsEscape
	jsTemplate
	jsTemplateSubstitution
	jsArguments
	jsBinary
	jsParenthesized
	// For lint.
	jsWith
	jsShorthandPattern
	jsShorthandProperty
	jsAssignment
	jsVarDeclarator
	jsFunctionDecl
	jsFunctionExpr
	jsClassDecl
	jsClass
	jsFormalParams
	jsArrayPattern
	jsRestPattern
	jsImportClause
	jsNamespaceImport
	jsArrow
	jsAssignPattern
	jsPairPattern
	jsCatch
	jsImportSpecifier
	jsForIn
	jsExportSpecifier
	jsUnary
)

var jsKindNames = map[string]kind{
	"identifier": jsIdentifier, "property_identifier": jsPropertyIdentifier,
	"member_expression": jsMember, "subscript_expression": jsSubscript,
	"call_expression": jsCall, "new_expression": jsNew, "import": jsImportKeyword,
	"import_statement": jsImportStatement, "export_statement": jsExportStatement,
	"string": jsString, "string_fragment": jsStringFragment, "escape_sequence": jsEscape,
	"template_string": jsTemplate, "template_substitution": jsTemplateSubstitution,
	"arguments": jsArguments, "binary_expression": jsBinary,
	"parenthesized_expression": jsParenthesized,
	"with_statement":           jsWith, "shorthand_property_identifier_pattern": jsShorthandPattern,
	"shorthand_property_identifier": jsShorthandProperty, "assignment_expression": jsAssignment,
	"variable_declarator": jsVarDeclarator, "function_declaration": jsFunctionDecl,
	"generator_function_declaration": jsFunctionDecl, "function_expression": jsFunctionExpr,
	"generator_function": jsFunctionExpr, "class_declaration": jsClassDecl, "class": jsClass,
	"formal_parameters": jsFormalParams, "array_pattern": jsArrayPattern, "rest_pattern": jsRestPattern,
	"import_clause": jsImportClause, "namespace_import": jsNamespaceImport, "arrow_function": jsArrow,
	"assignment_pattern": jsAssignPattern, "pair_pattern": jsPairPattern, "catch_clause": jsCatch,
	"import_specifier": jsImportSpecifier, "for_in_statement": jsForIn,
	"export_specifier": jsExportSpecifier, "unary_expression": jsUnary,
}

var jsFieldNames = []string{"source", "function", "arguments", "object", "property", "index", "left", "operator", "constructor",
	"name", "parameter", "value", "alias", "kind"}

var jsGrammarOnce = sync.OnceValue(func() *grammar {
	return newGrammar(javascript.Language(), jsKindNames, jsFieldNames)
})

func jsGrammar() *grammar { return jsGrammarOnce() }

// jsAnalyser applies the JavaScript (node) rules.
type jsAnalyser struct {
	pool     *parserPool
	policy   *Policy
	globals  set
	process  set
	envNames set // the variables a program may read by name
	envHint  string
	f        struct {
		source, function, arguments, object, property, index, left, operator, constructor uint16
		name, parameter, value, alias, kind                                               uint16
	}
}

func newJSAnalyser(p *Policy, pool *parserPool) *jsAnalyser {
	a := &jsAnalyser{pool: pool, policy: p,
		globals: newSet(p.JavaScript.ForbiddenGlobals), process: newSet(p.JavaScript.ForbiddenProcess),
		envNames: environmentNames(p, "javascript"), envHint: envHint(p, "process.env.HOME")}
	g := pool.g
	a.f.source, a.f.function, a.f.arguments = g.field("source"), g.field("function"), g.field("arguments")
	a.f.object, a.f.property, a.f.index = g.field("object"), g.field("property"), g.field("index")
	a.f.left, a.f.operator, a.f.constructor = g.field("left"), g.field("operator"), g.field("constructor")
	a.f.name, a.f.parameter, a.f.value = g.field("name"), g.field("parameter"), g.field("value")
	a.f.alias, a.f.kind = g.field("alias"), g.field("kind")
	return a
}

// networkGlobals are the forbidden globals reported as network access.
var networkGlobals = set{"fetch": true, "XMLHttpRequest": true, "WebSocket": true, "EventSource": true, "importScripts": true}

// globalObjects name the global object.
var globalObjects = set{"globalThis": true, "global": true, "window": true, "self": true}

// fsMethods take a path as first argument (and the second for the two-path ones).
var fsMethods = set{
	"readFile": true, "readFileSync": true, "writeFile": true, "writeFileSync": true,
	"appendFile": true, "appendFileSync": true, "createReadStream": true, "createWriteStream": true,
	"open": true, "openSync": true, "unlink": true, "unlinkSync": true, "rm": true, "rmSync": true,
	"rmdir": true, "rmdirSync": true, "mkdir": true, "mkdirSync": true, "readdir": true,
	"readdirSync": true, "copyFile": true, "copyFileSync": true, "rename": true, "renameSync": true,
	"stat": true, "statSync": true, "lstat": true, "lstatSync": true, "existsSync": true,
	"access": true, "accessSync": true, "symlink": true, "symlinkSync": true, "chmod": true,
	"chmodSync": true, "truncate": true, "truncateSync": true, "cp": true, "cpSync": true,
	"opendir": true, "opendirSync": true, "readlink": true, "readlinkSync": true, "watch": true,
}

type jsFile struct {
	*jsAnalyser
	t   *tree
	out *collector
}

func (a *jsAnalyser) analyse(ctx context.Context, code []byte, out *collector) error {
	t, release, err := a.pool.parse(ctx, code)
	if err != nil {
		return err
	}
	defer release()
	t.reportSyntaxErrors(out, "fix the syntax at this line; the code must run under node")
	f := &jsFile{jsAnalyser: a, t: t, out: out}
	for i := int32(0); i < int32(len(t.nodes)); i++ {
		if i&0xFFF == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		switch t.kind(i) {
		case jsImportStatement, jsExportStatement:
			if src := t.child(i, a.f.source); src >= 0 {
				if m, ok := f.literal(src); ok {
					f.checkModule(src, m)
				}
			}
		case jsCall:
			f.checkCall(i)
		case jsIdentifier:
			f.checkIdentifier(i)
		case jsMember:
			f.checkMember(i)
		case jsSubscript:
			f.checkSubscript(i)
		}
	}
	if out.lint != nil && !tsparse.HasError(t.nodes) {
		f.lint()
	}
	return nil
}

func (f *jsFile) add(rule string, i int32, msg, hint string) {
	s, e := f.t.span(i)
	f.out.add(rule, s, e, msg, hint)
}

// checkModule applies the module rules to a require/import of m.
func (f *jsFile) checkModule(at int32, m string) {
	if strings.HasPrefix(m, ".") || strings.HasPrefix(m, "/") || strings.HasPrefix(m, "~") {
		if why := pathOutside(m, true, nil); why != "" {
			f.add(RulePathOutside, at, fmt.Sprintf("module path %q is outside the workspace: %s", m, why), pathHint)
		}
		return
	}
	name := strings.TrimPrefix(m, "node:")
	root := name
	if !strings.HasPrefix(name, "@") {
		root, _, _ = strings.Cut(name, "/")
	}
	js := &f.policy.JavaScript
	if f.policy.Mode == ModeAllow {
		if !slicesContains(js.AllowedModules, root) && !slicesContains(js.AllowedModules, name) {
			f.add(RuleImportNotAllowed, at, fmt.Sprintf("module %s is not in the allowed list", name),
				"use only the allowed modules: "+shortList(js.AllowedModules))
		}
		return
	}
	if slicesContains(js.ForbiddenModules, root) || slicesContains(js.ForbiddenModules, name) {
		hint := "do the work in JavaScript itself with the allowed modules (fs on workspace files, path, ...)"
		switch root {
		case "net", "http", "https", "http2", "dgram", "tls", "dns", "axios", "node-fetch", "got", "request", "undici", "ws", "superagent":
			hint = "the sandbox has no network; read the input files in the workspace instead"
		case "child_process", "cluster", "worker_threads":
			hint = "do the work in JavaScript itself; starting other programs or workers is not allowed"
		}
		f.add(RuleForbiddenImport, at, fmt.Sprintf("module %s is forbidden", name), hint)
	}
}

func slicesContains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

func (f *jsFile) checkCall(i int32) {
	t := f.t
	fn := t.child(i, f.f.function)
	args := t.child(i, f.f.arguments)
	first := t.firstNamed(args)
	name := ""
	switch t.kind(fn) {
	case jsIdentifier:
		name = t.text(fn)
	case jsMember:
		name = t.text(t.child(fn, f.f.property))
	case jsImportKeyword:
		name = "import"
	}
	switch name {
	case "require", "import":
		if t.kind(fn) == jsMember && name == "require" || t.kind(fn) == jsIdentifier || name == "import" {
			if m, ok := f.literal(first); ok {
				f.checkModule(first, m)
			} else {
				f.add(RuleDynamicImport, i, name+" with a computed module name can load anything",
					"require or import modules by a literal name at the top of the file")
			}
		}
	case "setTimeout", "setInterval", "setImmediate":
		if _, ok := f.literal(first); ok && first >= 0 {
			f.add(RuleForbiddenGlobalJS, i, name+" with a string argument evaluates it as code",
				"pass a function: "+name+"(() => { ... }, ms)")
		}
	}
	if fsMethods[name] && t.kind(fn) != jsImportKeyword {
		for a, n := first, 0; a >= 0 && n < 2; a, n = t.nextNamed(a), n+1 {
			p, exact := f.prefix(a, 0)
			if why := pathOutside(p, exact, f.policy.Files.AllowedAbsolute); why != "" {
				f.add(RulePathOutside, a, fmt.Sprintf("%s uses %q, outside the workspace: %s", name, p, why), pathHint)
			}
		}
	}
}

// checkIdentifier reports references to forbidden globals and to require or
// process used as values.
func (f *jsFile) checkIdentifier(i int32) {
	t := f.t
	name := t.text(i)
	p := t.parent(i)
	switch {
	case f.globals[name]:
		if networkGlobals[name] {
			f.add(RuleNetworkAccess, i, name+" reaches the network", "the sandbox has no network; read the input files in the workspace instead")
		} else {
			f.add(RuleForbiddenGlobalJS, i, "uses the forbidden global "+name, "write the code directly instead of building it as a string")
		}
	case name == "require":
		if !(t.kind(p) == jsCall && t.fieldOf(i) == f.f.function) && !f.isMainModuleTest(p) {
			f.add(RuleDynamicImport, i, "require is used as a value, hiding what it loads",
				"call require with a literal module name at the top of the file")
		}
	case name == "process":
		if t.kind(p) == jsMember && t.fieldOf(i) == f.f.object {
			return // checked with the member
		}
		if t.kind(p) == jsSubscript && t.fieldOf(i) == f.f.object {
			return
		}
		f.add(RuleProcessAccess, i, "process is used as a value, exposing its environment and bindings",
			"use process.argv, process.stdout or process.exit directly")
	}
}

// mainModuleTest is Node's "am I the program?" idiom, the one use of
// require.main that loads nothing: require.main === module.
var mainModuleTest = lazyre.New(`^(?:require\.main\s*[!=]==?\s*module|module\s*[!=]==?\s*require\.main)$`)

// isMainModuleTest reports whether member m (require.main) is a side of
// the comparison require.main === module, and nothing more.
func (f *jsFile) isMainModuleTest(m int32) bool {
	t := f.t
	if m < 0 || t.kind(m) != jsMember || t.text(t.child(m, f.f.property)) != "main" {
		return false
	}
	b := t.parent(m)
	return b >= 0 && t.kind(b) == jsBinary && mainModuleTest.MatchString(t.text(b))
}

func (f *jsFile) checkMember(i int32) {
	t := f.t
	obj := t.child(i, f.f.object)
	prop := t.text(t.child(i, f.f.property))
	f.checkProperty(i, obj, prop, true)
}

func (f *jsFile) checkSubscript(i int32) {
	t := f.t
	obj := t.child(i, f.f.object)
	idx := t.child(i, f.f.index)
	prop, ok := f.literal(idx)
	if !ok {
		if t.kind(obj) == jsIdentifier && (globalObjects[t.text(obj)] || t.text(obj) == "process") {
			f.add(RuleDynamicGlobal, i, "computed property of "+t.text(obj)+" can reach any global",
				"refer to the value by its name")
		}
		return
	}
	f.checkProperty(i, obj, prop, false)
}

// checkProperty applies the property rules to obj.prop or obj["prop"].
func (f *jsFile) checkProperty(i, obj int32, prop string, dotted bool) {
	t := f.t
	objName := ""
	if t.kind(obj) == jsIdentifier {
		objName = t.text(obj)
	}
	switch {
	case objName == "process" && f.process[prop]:
		if prop == "env" {
			f.checkEnv(i)
		} else {
			f.add(RuleProcessAccess, i, "process."+prop+" escapes the runtime", "remove it; it is not needed to compute results")
		}
	case globalObjects[objName] && f.globals[prop]:
		f.add(RuleForbiddenGlobalJS, i, objName+"."+prop+" reaches the forbidden global "+prop,
			"write the code directly instead of building it as a string")
	case prop == "constructor" && (!dotted || f.isConstructorMember(obj)):
		f.add(RuleConstructorAccess, i, ".constructor chains reach Function, which evaluates strings",
			"use instanceof or typeof to check types")
	case prop == "__proto__" || prop == "__defineGetter__" || prop == "__lookupGetter__":
		f.add(RuleConstructorAccess, i, prop+" rewires prototypes", "use Object.getPrototypeOf or classes")
	}
}

func (f *jsFile) isConstructorMember(i int32) bool {
	t := f.t
	switch t.kind(i) {
	case jsMember:
		return t.text(t.child(i, f.f.property)) == "constructor"
	case jsSubscript:
		s, ok := f.literal(t.child(i, f.f.index))
		return ok && s == "constructor"
	}
	return false
}

// literal returns the value of a string literal or a template without
// substitutions.
func (f *jsFile) literal(i int32) (string, bool) {
	if i < 0 {
		return "", false
	}
	k := f.t.kind(i)
	if k != jsString && k != jsTemplate {
		return "", false
	}
	return f.prefix(i, 0)
}

// prefix returns the literal text an expression starts with and whether it
// is the whole value (strings, templates up to the first ${}, + chains).
func (f *jsFile) prefix(i int32, depth int) (string, bool) {
	t := f.t
	if i < 0 || depth > 32 {
		return "", false
	}
	switch t.kind(i) {
	case jsString, jsTemplate:
		var b strings.Builder
		for c := t.node(i).FirstChild; c >= 0; c = t.node(c).NextSibling {
			switch t.kind(c) {
			case jsStringFragment:
				b.WriteString(t.text(c))
			case jsEscape:
				b.WriteString(decodeJSEscape(t.text(c)))
			case jsTemplateSubstitution:
				return b.String(), false
			}
		}
		return b.String(), true
	case jsParenthesized:
		return f.prefix(t.firstNamed(i), depth+1)
	case jsBinary:
		if t.text(t.child(i, f.f.operator)) == "+" {
			s, _ := f.prefix(t.child(i, f.f.left), depth+1)
			return s, false
		}
	case jsCall:
		switch t.text(t.child(i, f.f.function)) {
		case "path.join", "path.resolve", "path.posix.join", "path.posix.resolve":
			return f.joinPrefix(t.child(i, f.f.arguments), depth)
		}
	}
	return "", false
}

// joinPrefix is prefix for path.join(args) and path.resolve(args): the
// prefix of an argument that leaves the workspace (a later absolute one
// restarts the path, a .. climbs), or else of the first.
func (f *jsFile) joinPrefix(args int32, depth int) (string, bool) {
	first := ""
	for a, n := f.t.firstNamed(args), 0; a >= 0; a, n = f.t.nextNamed(a), n+1 {
		p, exact := f.prefix(a, depth+1)
		if pathOutside(p, exact, nil) != "" {
			return p, false
		}
		if n == 0 {
			first = p
		}
	}
	return first, false
}

// decodeJSEscape decodes one escape sequence such as \x41, \u0041 or \u{41}.
func decodeJSEscape(e string) string {
	if len(e) < 2 {
		return e
	}
	hex := ""
	switch e[1] {
	case 'x', 'u':
		hex = strings.Trim(e[2:], "{}")
	case 'n':
		return "\n"
	case 't':
		return "\t"
	default:
		return e[1:]
	}
	v, err := strconv.ParseUint(hex, 16, 32)
	if err != nil || v > 0x10FFFF {
		return e
	}
	return string(rune(v))
}
