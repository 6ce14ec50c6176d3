package safety

import (
	"fmt"
	"strings"
)

// pathKeywords are keyword arguments that name a file.
var pathKeywords = set{
	"file": true, "fname": true, "filename": true, "filepath": true, "path": true, "src": true, "dst": true,
	"path_or_buf": true, "filepath_or_buffer": true, "io": true, "excel_writer": true,
	"path_or_buffer": true,
}

// checkCall applies the rules that depend on what is called and with what.
func (f *pyFile) checkCall(i int32) {
	t := f.t
	fn := t.child(i, f.f.function)
	args := t.child(i, f.f.arguments)
	q, _ := f.qualified(fn)
	last := lastOf(q)
	if t.kind(fn) == pyAttribute {
		last = normIdent(t.text(t.child(fn, f.f.attribute)))
	}
	switch {
	case q == "getattr" || q == "setattr" || q == "delattr" || q == "builtins.getattr":
		f.checkGetattr(i, lastOf(q), args)
	case q == "operator.attrgetter" || q == "operator.methodcaller":
		f.checkAttrgetter(i, last, args)
	case last == "__setattr__" || last == "__delattr__":
		f.checkDunderSetattr(i, last, args)
	case last == "format" || last == "format_map" || last == "vformat":
		f.checkFormatCall(fn, q, args)
	case dynamicImportAttrs[last]:
		f.add(RuleDynamicImport, i, fmt.Sprintf("%s imports a module by computed name", last),
			"import the modules you need with a plain import statement at the top")
	}
	if d, ok := f.deser[q]; ok {
		f.checkDeserializer(i, q, d, args)
	}
	switch {
	case f.fileQual[q]:
		f.checkPathArgs(i, q, args, true)
	case f.isFileFunc(last):
		f.checkPathArgs(i, q, args, false)
	}
}

// positional returns the n-th positional argument of an argument list, or -1.
// splat is true when a *args or **kwargs comes first, hiding the position.
func (f *pyFile) positional(args int32, n int) (arg int32, splat bool) {
	t := f.t
	if t.kind(args) != pyArgumentList {
		return -1, false
	}
	k := 0
	for c := t.firstNamed(args); c >= 0; c = t.nextNamed(c) {
		switch t.kind(c) {
		case pyKeywordArgument:
			continue
		case pyListSplat, pyDictSplat:
			return -1, true
		}
		if k == n {
			return c, false
		}
		k++
	}
	return -1, false
}

// keyword returns the value of keyword argument name, or -1.
func (f *pyFile) keyword(args int32, name string) int32 {
	t := f.t
	if t.kind(args) != pyArgumentList {
		return -1
	}
	for c := t.firstNamed(args); c >= 0; c = t.nextNamed(c) {
		if t.kind(c) == pyKeywordArgument && normIdent(t.text(t.child(c, f.f.name))) == name {
			return t.child(c, f.f.value)
		}
	}
	return -1
}

// hasDictSplat reports whether the call passes **kwargs, which can hide any keyword.
func (f *pyFile) hasDictSplat(args int32) bool {
	t := f.t
	for c := t.firstNamed(args); c >= 0; c = t.nextNamed(c) {
		if t.kind(c) == pyDictSplat {
			return true
		}
	}
	return false
}

// checkGetattr: getattr/setattr/delattr need a literal, ordinary name.
func (f *pyFile) checkGetattr(call int32, fn string, args int32) {
	obj, _ := f.positional(args, 0)
	arg, splat := f.positional(args, 1)
	name, literal := f.literalString(arg)
	if arg < 0 || splat || !literal {
		f.add(RuleDynamicAttribute, call, fmt.Sprintf("%s with a computed attribute name can reach anything", fn), builtinHint(fn))
		return
	}
	if why := f.badAttrName(name, obj); why != "" {
		f.add(RuleDynamicAttribute, call, fmt.Sprintf("%s(..., %q) %s", fn, name, why), builtinHint(fn))
		return
	}
	if fn != "getattr" {
		f.checkHookName(call, fn, name)
	}
}

// metadataDunders are the dunders that setattr and delattr may name: the
// metadata functools.wraps copies. Any other is an interpreter hook
// (__getattr__, __eq__, __init_subclass__, ...) installed or removed where
// the class body does not show it.
var metadataDunders = set{"__doc__": true, "__name__": true, "__qualname__": true, "__module__": true}

// checkHookName reports setattr or delattr (or a __setattr__/__delattr__
// call) naming a dunder that is not metadata.
func (f *pyFile) checkHookName(call int32, fn, name string) {
	if isDunder(name) && !metadataDunders[name] {
		f.add(RuleDynamicAttribute, call, fmt.Sprintf("%s(..., %q) installs or removes an interpreter hook at run time", fn, name),
			"define the method in the class body; set only plain attributes, by name (obj.name = value)")
	}
}

// checkDunderSetattr checks obj.__setattr__("__x__", v) and
// type.__setattr__(A, "__x__", v): a literal dunder among the first two
// arguments is a hook installed at run time.
func (f *pyFile) checkDunderSetattr(call int32, fn string, args int32) {
	for n := 0; n < 2; n++ {
		arg, splat := f.positional(args, n)
		if splat {
			return
		}
		if name, ok := f.literalString(arg); ok && isDunder(name) {
			f.checkHookName(call, fn, name)
			return
		}
	}
}

// badAttrName explains why reading attribute name (of obj, when known) is
// not allowed, or returns "".
func (f *pyFile) badAttrName(name string, obj int32) string {
	switch {
	case f.frames[name]:
		return "walks frames or code objects"
	case isDunder(name) && !f.allowedDunders[name]:
		return "reaches interpreter internals"
	case isPrivate(name):
		if _, module := f.qualified(obj); module || obj < 0 {
			return "reads a private attribute of a module"
		}
	}
	if m, ok := f.reexported(name); ok {
		return "does what the forbidden module " + m + " does"
	}
	if obj >= 0 && f.restrictedUse {
		if why := f.restrictedGetattr(obj, name); why != "" {
			return why
		}
	}
	if f.forbiddenRootsF.mayHave(name) && f.forbiddenRoots[name] {
		if _, module := f.qualified(obj); module || obj < 0 {
			if f.restricted[name] && f.checkModuleQuiet(name) {
				return "reaches the module " + name + " through another, where its uses cannot be followed"
			}
			return "reaches the forbidden module " + name
		}
	}
	return ""
}

// checkAttrgetter: operator.attrgetter and methodcaller need literal,
// ordinary (dotted) names.
func (f *pyFile) checkAttrgetter(call int32, fn string, args int32) {
	t := f.t
	n := 0
	for c := t.firstNamed(args); c >= 0; c = t.nextNamed(c) {
		if t.kind(c) == pyKeywordArgument {
			continue
		}
		n++
		if fn == "methodcaller" && n > 1 {
			break
		}
		name, literal := f.literalString(c)
		if !literal {
			f.add(RuleDynamicAttribute, call, fmt.Sprintf("%s with a computed attribute name can reach anything", fn), builtinHint(fn))
			return
		}
		for _, part := range strings.Split(name, ".") {
			if why := f.badAttrName(part, -1); why != "" {
				f.add(RuleDynamicAttribute, call, fmt.Sprintf("%s(%q) %s", fn, name, why), builtinHint(fn))
				return
			}
		}
	}
	if n == 0 {
		f.add(RuleDynamicAttribute, call, fmt.Sprintf("%s with a computed attribute name can reach anything", fn), builtinHint(fn))
	}
}

// checkDeserializer reports a call to a deserializer unless its keyword
// condition makes it safe.
func (f *pyFile) checkDeserializer(call int32, q string, d *Deserializer, args int32) {
	t := f.t
	if d.Keyword != "" {
		v := f.keyword(args, d.Keyword)
		if v < 0 && d.SafeIfAbsent && !f.hasDictSplat(args) {
			return
		}
		if v >= 0 {
			got := strings.Join(strings.Fields(t.text(v)), "")
			for _, s := range d.SafeValues {
				if got == s {
					return
				}
			}
		}
	}
	hint := "store data as CSV, JSON or Parquet and read it with pandas.read_csv, json.load or pandas.read_parquet"
	switch {
	case d.Keyword == "allow_pickle":
		hint = "pass allow_pickle=False (the default) and store object data as CSV or JSON"
	case d.Keyword == "weights_only":
		hint = "pass weights_only=True to torch.load"
	case strings.HasPrefix(q, "yaml."):
		hint = "use yaml.safe_load"
	}
	f.add(RuleDeserialization, call, fmt.Sprintf("%s can run code hidden in the data it loads", q), hint)
}

func (f *pyFile) isFileFunc(last string) bool {
	if f.fileFuncs[last] {
		return true
	}
	for _, p := range f.filePrefixes {
		if strings.HasPrefix(last, p) && len(last) > len(p) {
			return true
		}
	}
	return false
}

// checkPathArgs reports a path argument that leaves the workspace: the
// first positional argument, or with all every one (os.rename(a, b)), and
// the path keywords.
func (f *pyFile) checkPathArgs(call int32, q string, args int32, all bool) {
	t := f.t
	check := func(arg int32) {
		p, exact := f.pathPrefix(arg, 0)
		if why := pathOutside(p, exact, f.policy.Files.AllowedAbsolute); why != "" {
			f.add(RulePathOutside, arg, fmt.Sprintf("%s uses %q, outside the workspace: %s", lastOf(q), p, why), pathHint)
		}
	}
	for n := 0; n == 0 || all; n++ {
		a, _ := f.positional(args, n)
		if a < 0 {
			break
		}
		check(a)
	}
	for c := t.firstNamed(args); c >= 0; c = t.nextNamed(c) {
		if t.kind(c) == pyKeywordArgument && pathKeywords[normIdent(t.text(t.child(c, f.f.name)))] {
			check(t.child(c, f.f.value))
		}
	}
}

// pathPrefix returns the literal text an expression starts with: a string's
// value, the text before an f-string's first field, the left side of a
// + concatenation. exact reports whether it is the whole value.
func (f *pyFile) pathPrefix(i int32, depth int) (string, bool) {
	t := f.t
	if depth > 32 {
		return "", false
	}
	switch t.kind(i) {
	case pyString, pyConcatString:
		return f.stringValue(i)
	case pyParenExpr:
		return f.pathPrefix(t.firstNamed(i), depth+1)
	case pyBinaryOp:
		if op := t.child(i, f.f.operator); t.text(op) == "+" {
			s, _ := f.pathPrefix(t.child(i, f.f.left), depth+1)
			return s, false
		}
	case pyCall:
		if q, _ := f.qualified(t.child(i, f.f.function)); q == "os.path.join" || q == "posixpath.join" {
			return f.joinPrefix(t.child(i, f.f.arguments), depth)
		}
	}
	return "", false
}

// joinPrefix is pathPrefix for os.path.join(args): the prefix of an
// argument that leaves the workspace (a later absolute one restarts the
// path, a .. climbs), or else of the first.
func (f *pyFile) joinPrefix(args int32, depth int) (string, bool) {
	first := ""
	for n := 0; ; n++ {
		a, _ := f.positional(args, n)
		if a < 0 {
			return first, false
		}
		p, exact := f.pathPrefix(a, depth+1)
		if pathOutside(p, exact, nil) != "" {
			return p, false
		}
		if n == 0 {
			first = p
		}
	}
}

// checkLoop reports while True (or while 1) loops with no way out.
func (f *pyFile) checkLoop(i int32) {
	t := f.t
	cond := t.child(i, f.f.condition)
	switch t.kind(cond) {
	case pyTrue:
	case pyInteger:
		if s := strings.Trim(t.text(cond), "0_xXoObB"); s == "" {
			return
		}
	default:
		return
	}
	body := t.child(i, f.f.body)
	if body < 0 {
		return
	}
	for j, end := body, t.end(body); j < end; j++ {
		k := t.kind(j)
		switch k {
		case pyBreak, pyReturn, pyRaise, pyYield:
		case pyCall:
			q, _ := f.qualified(t.child(j, f.f.function))
			if q != "exit" && q != "quit" && q != "sys.exit" && q != "os._exit" {
				continue
			}
		default:
			continue
		}
		if f.exitsLoop(j, i, k == pyBreak) {
			return
		}
	}
	f.add(RuleUnboundedLoop, i, "this while loop never ends: it has no break, return or raise",
		"add a break when the work is done, or loop over a finite range with for")
}

// exitsLoop reports whether node j leaves loop: it is not inside a nested
// function, class or lambda, and for a break not inside a nested loop.
func (f *pyFile) exitsLoop(j, loop int32, isBreak bool) bool {
	t := f.t
	for p := t.parent(j); p >= 0 && p != loop; p = t.parent(p) {
		switch t.kind(p) {
		case pyFunctionDef, pyClassDef, pyLambda:
			return false
		case pyFor, pyWhile:
			if isBreak {
				return false
			}
		}
	}
	return true
}
