package safety

import (
	"fmt"
	"strings"
)

// Modules that may be imported although some of their functions may not
// (os and sys: the roots of python.forbidden_functions). The checker stops
// what is dangerous, not what is common: os.path, os.listdir, sys.argv and
// sys.exit pass; os.system, os.exec*, os.kill, sys.modules do not, by any
// spelling the checker can follow: an attribute through an import alias, a
// from-import, a getattr literal. What would hide the calls is refused
// too: the module itself bound, passed or returned as a value (o = os;
// o.system), a wildcard import, the module reached through another one
// (tempfile.os). The environment (os.environ, os.getenv) may be read by
// name, for the names the run passes (environment_names).

// pyEnvMappings and pyEnvGetters are how Python reads the environment.
var (
	pyEnvMappings = set{"os.environ": true, "os.environb": true}
	pyEnvGetters  = set{"os.getenv": true, "os.getenvb": true}
	// pySubmodules are the modules below a restricted one, which are as
	// much a way to its functions (os.path.os) when held as a value.
	pySubmodules = set{"os.path": true}
)

// forbiddenFunction reports whether q (os.system) is a forbidden function.
func (a *pyAnalyser) forbiddenFunction(q string) bool {
	if a.funcs[q] {
		return true
	}
	for _, p := range a.funcPrefixes {
		if strings.HasPrefix(q, p) && !strings.Contains(q[len(p):], ".") {
			return true
		}
	}
	return false
}

// hasForbiddenFunctions reports whether module m has forbidden functions.
func (a *pyAnalyser) hasForbiddenFunctions(m string) bool {
	for fn := range a.funcs {
		if strings.HasPrefix(fn, m+".") {
			return true
		}
	}
	for _, p := range a.funcPrefixes {
		if strings.HasPrefix(p, m+".") {
			return true
		}
	}
	return false
}

// forbiddenFunctionWhy says what a forbidden function does, and what to do
// instead.
func forbiddenFunctionWhy(q string) (what, hint string) {
	last := lastOf(q)
	switch {
	case q == "sys.modules" || q == "sys.meta_path" || q == "sys.path_hooks" || q == "sys.path_importer_cache":
		return "reaches the import machinery, and through it any module",
			"import the modules you need with a plain import statement at the top"
	case rootOf(q) == "sys":
		return "hooks or reaches into the interpreter",
			"do not trace or hook the interpreter; print the values you want to see"
	case strings.HasPrefix(last, "kill") || last == "pidfd_open":
		return "signals other processes",
			"signalling other processes is not allowed; return from main() or call sys.exit to stop"
	case strings.HasPrefix(last, "set") || last == "initgroups" || last == "chroot" || last == "unshare" || last == "login_tty":
		return "changes the user, group, session, root or namespaces of the process",
			"do the work as the program runs; changing its user, group or root is not allowed"
	case rootOf(q) == "os":
		return "runs other programs", "do the work in Python itself; running other programs is not allowed"
	}
	return "is forbidden by the policy", "remove this call; it is not allowed in generated code"
}

func (f *pyFile) addForbiddenFunction(i int32, q string) {
	what, hint := forbiddenFunctionWhy(q)
	f.add(RuleForbiddenFunction, i, fmt.Sprintf("%s %s", q, what), hint)
}

// checkRestrictedAttribute applies the rules to an attribute chain that
// starts at a name bound to a restricted module: os.system, o.environ.
func (f *pyFile) checkRestrictedAttribute(i int32) {
	t := f.t
	r := t.child(i, f.f.object)
	for {
		switch t.kind(r) {
		case pyAttribute:
			r = t.child(r, f.f.object)
			continue
		case pyParenExpr:
			r = t.firstNamed(r)
			continue
		}
		break
	}
	if t.kind(r) != pyIdentifier {
		return
	}
	if q, ok := f.alias(normIdent(t.text(r))); !ok || !f.restricted[rootOf(q)] {
		return
	}
	q, _ := f.qualified(i)
	switch {
	case q == "":
	case f.forbiddenFunction(q):
		f.addForbiddenFunction(i, q)
	default:
		f.checkRestrictedValue(i, q)
	}
}

// checkRestrictedValue applies the environment and module-as-value rules
// to node i, which stands for q (an attribute chain, or a name a
// from-import bound).
func (f *pyFile) checkRestrictedValue(i int32, q string) {
	switch {
	case (pyEnvMappings[q] || pyEnvGetters[q]) && !f.localName(i):
		f.checkEnvironment(i, q)
	case (f.restricted[q] || pySubmodules[q]) && f.heldAsValue(i) && !f.localName(i):
		f.add(RuleModuleAsValue, i, fmt.Sprintf("the module %s is used as a value, which hides what is called on it", q),
			fmt.Sprintf("call its functions directly, e.g. %s.name(...); do not store, pass or return the module", q))
	}
}

// localName reports whether node i is a name assigned to, or one that a
// scope around it binds (see boundLocally): not a read of the import it
// shares its name with.
func (f *pyFile) localName(i int32) bool {
	return f.t.kind(i) == pyIdentifier && (f.isBinding(i) || f.boundLocally(i, normIdent(f.t.text(i))))
}

// opensScope reports whether k opens a scope of its own.
func opensScope(k kind) bool {
	switch k {
	case pyFunctionDef, pyLambda, pyClassDef, pyListComp, pySetComp, pyDictComp, pyGenExpr:
		return true
	}
	return false
}

// boundLocally reports whether identifier i reads a variable that a
// function, lambda or comprehension around it binds, not the module's
// import of the same name (from os import path; def f(path): ...). As
// Python scopes, with what would hide the module kept visible: default
// values and a comprehension's first iterable belong to the scope
// outside; a class body reads the module's name when it has no value of
// its own yet (class C: os = os), so it binds nothing here; a global
// declaration makes the name the module's.
func (f *pyFile) boundLocally(i int32, name string) bool {
	t := f.t
	for gc, c, s := int32(-1), i, t.parent(i); s >= 0; gc, c, s = c, s, t.parent(s) {
		switch t.kind(s) {
		case pyFunctionDef, pyLambda:
			if t.fieldOf(c) == f.f.parameters {
				continue
			}
		case pyListComp, pySetComp, pyDictComp, pyGenExpr:
			if t.kind(c) == pyForIn && gc >= 0 && t.fieldOf(gc) == f.f.right && f.firstFor(s) == c {
				continue
			}
		default:
			continue
		}
		if bound, global := f.scopeBinds(s, name); global {
			return false
		} else if bound {
			return true
		}
	}
	return false
}

// firstFor returns comprehension s's first for clause.
func (f *pyFile) firstFor(s int32) int32 {
	for c := f.t.firstNamed(s); c >= 0; c = f.t.nextNamed(c) {
		if f.t.kind(c) == pyForIn {
			return c
		}
	}
	return -1
}

// scopeBinds reports whether scope s binds name itself (not in a scope
// nested in it), and whether it declares name global.
func (f *pyFile) scopeBinds(s int32, name string) (bound, global bool) {
	t := f.t
	for j, end := s+1, t.end(s); j < end; j++ {
		k := t.kind(j)
		if opensScope(k) {
			if k == pyFunctionDef || k == pyClassDef {
				if n := t.child(j, f.f.name); n >= 0 && normIdent(t.text(n)) == name {
					bound = true // def name: bound here
				}
			}
			j = t.end(j) - 1
			continue
		}
		if k != pyIdentifier || normIdent(t.text(j)) != name || (t.parent(j) == s && t.fieldOf(j) == f.f.name) {
			continue
		}
		switch t.kind(t.parent(j)) {
		case pyGlobal:
			return false, true
		case pyNamedExpr:
			if t.kind(s) != pyFunctionDef && t.kind(s) != pyLambda {
				continue // a walrus in a comprehension binds in the scope outside
			}
		}
		if f.isBinding(j) {
			bound = true
		}
	}
	return bound, false
}

// heldAsValue reports whether expression i is used other than by reading
// an attribute of it (m.name).
func (f *pyFile) heldAsValue(i int32) bool {
	t := f.t
	for {
		p := t.parent(i)
		switch {
		case t.kind(p) == pyParenExpr:
			i = p
			continue
		case t.kind(p) == pyAttribute && t.fieldOf(i) == f.f.object:
			return false
		}
		return true
	}
}

// checkEnvironment judges a use of the environment at node i, which is
// os.environ (q a mapping) or os.getenv (q a getter): reading a variable
// the run passes, by a literal name, passes, as does setting or deleting
// one by name; anything else is reported.
func (f *pyFile) checkEnvironment(i int32, q string) {
	t := f.t
	p := t.parent(i)
	if pyEnvGetters[q] {
		if t.kind(p) == pyCall && t.fieldOf(i) == f.f.function {
			f.checkEnvRead(p, q, t.child(p, f.f.arguments), false)
			return
		}
		f.add(RuleEnvironmentAccess, i, q+" used as a value can read any variable of the environment", f.envHint)
		return
	}
	switch t.kind(p) {
	case pyAttribute: // os.environ.get("X"), os.environ.setdefault("X", v)
		m := normIdent(t.text(t.child(p, f.f.attribute)))
		c := t.parent(p)
		if (m == "get" || m == "setdefault") && t.kind(c) == pyCall && t.fieldOf(p) == f.f.function {
			f.checkEnvRead(c, q+"."+m, t.child(c, f.f.arguments), m == "setdefault")
			return
		}
	case pySubscript: // os.environ["X"], read, set or deleted
		if t.fieldOf(i) == f.f.value {
			f.checkEnvSubscript(p, q)
			return
		}
	case pyComparison: // "X" in os.environ
		if f.checkEnvMembership(p, i) {
			return
		}
	}
	f.add(RuleEnvironmentAccess, i, q+" as a whole exposes every variable of the environment", f.envHint)
}

// checkEnvRead judges a call that reads a variable by the name in its
// first argument: os.getenv("X"), os.environ.get("X").
func (f *pyFile) checkEnvRead(call int32, what string, args int32, setdefault bool) {
	arg, _ := f.positional(args, 0)
	name, literal := f.literalString(arg)
	switch {
	case !literal || !isEnvName(name):
		f.add(RuleEnvironmentAccess, call, what+" with a computed name can read any variable of the environment", f.envHint)
	case !f.envNames[name]:
		hint := f.envHint
		if setdefault {
			hint = fmt.Sprintf("to set it, assign it: os.environ[%q] = value", name)
		}
		f.add(RuleEnvironmentAccess, call, what+" "+envNotPassed(name), hint)
	}
}

// checkEnvSubscript judges os.environ[KEY]: a write (an assignment to it,
// del) passes, a read by a name the run passes too.
func (f *pyFile) checkEnvSubscript(sub int32, q string) {
	t := f.t
	p := t.parent(sub)
	switch {
	case t.kind(p) == pyAssignment && t.fieldOf(sub) == f.f.left, t.kind(p) == pyDelete:
		return
	}
	name, literal := f.literalString(t.child(sub, f.f.subscript))
	switch {
	case !literal || !isEnvName(name):
		f.add(RuleEnvironmentAccess, sub, q+"[...] with a computed name can read any variable of the environment", f.envHint)
	case !f.envNames[name]:
		f.add(RuleEnvironmentAccess, sub, q+"[...] "+envNotPassed(name), f.envHint)
	}
}

// checkEnvMembership reports whether comparison c is "NAME" in env (or
// not in) with env node i on the right and NAME literal: it then judges
// NAME as a read, and returns true.
func (f *pyFile) checkEnvMembership(c, i int32) bool {
	t := f.t
	left := t.firstNamed(c)
	if left < 0 || t.nextNamed(left) != i || t.nextNamed(i) >= 0 {
		return false
	}
	op := strings.Join(strings.Fields(t.text(c)[t.nodes[left].End-t.nodes[c].Start:t.nodes[i].Start-t.nodes[c].Start]), " ")
	if op != "in" && op != "not in" {
		return false
	}
	name, literal := f.literalString(left)
	switch {
	case !literal || !isEnvName(name):
		f.add(RuleEnvironmentAccess, c, "testing a computed name against the environment can probe any variable", f.envHint)
	case !f.envNames[name]:
		f.add(RuleEnvironmentAccess, c, "the test "+envNotPassed(name), f.envHint)
	}
	return true
}

// restrictedGetattr explains why getattr(obj, name) on a restricted
// module reaches what the rules refuse, or returns "".
func (f *pyFile) restrictedGetattr(obj int32, name string) string {
	q, module := f.qualified(obj)
	if !module || !f.restricted[rootOf(q)] {
		return ""
	}
	full := q + "." + name
	switch {
	case f.forbiddenFunction(full):
		what, _ := forbiddenFunctionWhy(full)
		return "reaches " + full + ", which " + what
	case pyEnvMappings[full] || pyEnvGetters[full]:
		return "reaches " + full + ", which can read any variable of the environment"
	case f.restricted[name] || pySubmodules[full]:
		return "holds the module " + full + " as a value, which hides what is called on it"
	}
	return ""
}
