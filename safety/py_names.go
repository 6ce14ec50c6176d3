package safety

import "fmt"

var builtinHints = map[string]string{
	"exec":         "write the code directly instead of building it as a string",
	"eval":         "parse the value instead: int(), float(), json.loads() or ast.literal_eval(); compute expressions with ordinary Python",
	"compile":      "write the code directly; for regular expressions use re.compile",
	"__import__":   "import the module with a plain import statement at the top of the file",
	"breakpoint":   "remove the breakpoint; print values you want to inspect",
	"input":        "there is no interactive input; read the data from a file in the workspace or define it in the code",
	"globals":      "pass the values you need as arguments or keep them in a dict you create",
	"locals":       "pass the values you need as arguments or keep them in a dict you create",
	"vars":         "read the attributes you need by name, or use dataclasses.asdict",
	"open_code":    "use open() on a relative path in the workspace",
	"getattr":      "access the attribute by its name, e.g. obj.name, or use a dict lookup",
	"setattr":      "assign the attribute by its name, e.g. obj.name = value, or use a dict",
	"delattr":      "delete the attribute by its name, e.g. del obj.name",
	"attrgetter":   "use a lambda that reads the attribute by name, e.g. lambda o: o.name",
	"methodcaller": "use a lambda that calls the method by name, e.g. lambda o: o.strip()",
}

func builtinHint(name string) string {
	if h, ok := builtinHints[name]; ok {
		return h
	}
	return "remove this call; it is not allowed in generated code"
}

func dunderHint(name string) string {
	switch name {
	case "__class__":
		return "use type(obj) or isinstance(obj, T) instead of obj.__class__"
	case "__dict__":
		return "read the attributes you need by name, or use dataclasses.asdict"
	case "__builtins__", "__import__", "__loader__", "__spec__":
		return "import modules with a plain import statement and call builtins directly"
	}
	return "do not reach interpreter internals; use the object's public attributes and methods"
}

// checkName applies the name rules to an identifier that is read.
func (f *pyFile) checkName(i int32) {
	t := f.t
	role := f.role(i)
	if role != roleReference {
		return
	}
	name := normIdent(t.text(i))
	switch {
	case f.builtinsF.mayHave(name) && f.builtins[name]:
		if f.shadowable[name] && f.bound[name] {
			return
		}
		how := "uses"
		if p := t.parent(i); t.kind(p) == pyCall && t.fieldOf(i) == f.f.function {
			how = "calls"
		}
		f.add(RuleForbiddenBuiltin, i, fmt.Sprintf("%s the forbidden builtin %s", how, name), builtinHint(name))
	case name == "getattr" || name == "setattr" || name == "delattr":
		if p := t.parent(i); t.kind(p) == pyCall && t.fieldOf(i) == f.f.function {
			return // checked with the call
		}
		f.add(RuleGetattrAsValue, i, fmt.Sprintf("%s is passed as a value, so the attribute names it will use are hidden", name), builtinHint(name))
	case isDunder(name) && !f.allowedDunders[name]:
		f.add(RuleIntrospection, i, fmt.Sprintf("the name %s reaches interpreter internals", name), dunderHint(name))
	}
	if m, ok := f.reexported(name); ok {
		f.add(RuleModuleReexport, i, reexportMessage(name, m), importHint(m))
	}
	if q, ok := f.alias(name); ok {
		if f.restrictedUse && f.restricted[rootOf(q)] {
			f.checkRestrictedValue(i, q) // a forbidden function is reported at its from-import
		}
		switch lastOf(q) {
		case "attrgetter", "methodcaller":
			if p := t.parent(i); !(t.kind(p) == pyCall && t.fieldOf(i) == f.f.function) {
				f.add(RuleGetattrAsValue, i, fmt.Sprintf("%s is passed as a value, so the attribute names it will use are hidden", lastOf(q)), builtinHint(lastOf(q)))
			}
		}
	}
}

// dynamicImportAttrs are functions that import or load modules by name.
var dynamicImportAttrs = set{
	"import_module": true, "load_module": true, "exec_module": true, "load_source": true,
	"load_dynamic": true, "find_spec": true, "module_from_spec": true, "spec_from_file_location": true,
}

// checkAttribute applies the attribute rules to obj.name.
func (f *pyFile) checkAttribute(i int32) {
	t := f.t
	an := t.child(i, f.f.attribute)
	if an < 0 {
		return
	}
	name := normIdent(t.text(an))
	obj := t.child(i, f.f.object)
	switch {
	case f.framesF.mayHave(name) && f.frames[name]:
		f.add(RuleFrameAccess, an, fmt.Sprintf(".%s walks frames or code objects", name),
			"do not inspect the running program; pass the values you need as arguments")
	case isDunder(name) && !f.allowedDunders[name]:
		f.add(RuleIntrospection, an, fmt.Sprintf(".%s reaches interpreter internals", name), dunderHint(name))
	case f.dynImportF.mayHave(name) && dynamicImportAttrs[name]:
		f.add(RuleDynamicImport, i, fmt.Sprintf(".%s imports a module by computed name", name),
			"import the modules you need with a plain import statement at the top")
	case f.reexportsF.mayHave(name) && f.reexports[name] != "":
		if m, ok := f.reexported(name); ok {
			f.add(RuleModuleReexport, an, reexportMessage(name, m), importHint(m))
		}
	case isPrivate(name):
		if q, module := f.qualified(obj); module {
			f.add(RulePrivateAttribute, an, fmt.Sprintf("%s is a private attribute of module %s", name, q),
				"use only the public API of the module; private attributes can reach forbidden modules")
		}
	case f.forbiddenRootsF.mayHave(name) && f.forbiddenRoots[name]:
		if q, module := f.qualified(obj); module {
			f.add(RuleModuleReexport, an, f.throughMessage(q+"."+name, name, q), f.throughHint(name))
		}
	}
	if f.restrictedUse {
		f.checkRestrictedAttribute(i)
	}
}

// throughMessage says that what (tempfile.os) reaches module m through
// another module, via.
func (f *pyFile) throughMessage(what, m, via string) string {
	if f.restricted[m] && f.checkModuleQuiet(m) {
		return fmt.Sprintf("%s reaches the module %s through %s, where its uses cannot be followed", what, m, via)
	}
	return fmt.Sprintf("%s reaches the forbidden module %s through %s", what, m, via)
}

func (f *pyFile) throughHint(m string) string {
	if f.restricted[m] && f.checkModuleQuiet(m) {
		return fmt.Sprintf("import %s by its own name: import %s", m, m)
	}
	return importHint(m)
}

// reexported returns the module that a function named name stands for
// (asyncio's create_subprocess_exec: subprocess) when that module is not
// allowed.
func (f *pyFile) reexported(name string) (string, bool) {
	if !f.reexportsF.mayHave(name) {
		return "", false
	}
	m, ok := f.reexports[name]
	if !ok || f.checkModuleQuiet(m) {
		return "", false
	}
	return m, true
}

func reexportMessage(name, module string) string {
	return fmt.Sprintf("%s does what the forbidden module %s does", name, module)
}
