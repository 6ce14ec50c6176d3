package safety

import "fmt"

// moduleHints says what to use instead of a forbidden module.
var moduleHints = map[string]string{
	"os":              "use pathlib.Path for paths inside the workspace and pandas or open() for files; do not use os",
	"sys":             "print results instead of writing to sys.stdout, and return from main() instead of sys.exit",
	"subprocess":      "do the work in Python itself; running other programs is not allowed",
	"socket":          "the sandbox has no network; read the input files in the workspace instead",
	"http":            "the sandbox has no network; read the input files in the workspace instead",
	"urllib":          "the sandbox has no network; read the input files in the workspace instead",
	"urllib3":         "the sandbox has no network; read the input files in the workspace instead",
	"requests":        "the sandbox has no network; read the input files in the workspace instead",
	"httpx":           "the sandbox has no network; read the input files in the workspace instead",
	"aiohttp":         "the sandbox has no network; read the input files in the workspace instead",
	"multiprocessing": "use vectorised numpy or pandas operations instead of processes",
	"concurrent":      "use vectorised numpy or pandas operations instead of threads or processes",
	"threading":       "use vectorised numpy or pandas operations instead of threads",
	"pickle":          "store data as CSV, JSON or Parquet and read it with pandas or json",
	"marshal":         "store data as CSV, JSON or Parquet and read it with pandas or json",
	"shelve":          "store data as CSV, JSON or Parquet and read it with pandas or json",
	"importlib":       "import the modules you need with a plain import statement at the top",
	"inspect":         "pass the values you need as arguments instead of inspecting the running program",
	"gc":              "let Python manage memory; delete large objects with del if needed",
	"builtins":        "call builtins such as print or len directly",
	"ctypes":          "use numpy for fast numeric work; calling C is not allowed",
}

func importHint(module string) string {
	if h, ok := moduleHints[rootOf(module)]; ok {
		return h
	}
	return "remove this import and do the work with the standard library or numpy/pandas"
}

// checkImport applies the import rules to an import or from-import node.
func (f *pyFile) checkImport(i int32) {
	t := f.t
	if t.kind(i) == pyImport {
		for c := t.node(i).FirstChild; c >= 0; c = t.node(c).NextSibling {
			switch t.kind(c) {
			case pyDottedName:
				f.checkModule(c, f.dotted(c))
			case pyAliasedImport:
				n := t.child(c, f.f.name)
				f.checkModule(c, f.dotted(n))
			}
		}
		return
	}
	mod := t.child(i, f.f.moduleName)
	relative := t.kind(mod) != pyDottedName
	m := ""
	if !relative {
		m = f.dotted(mod)
		if m == "__future__" {
			return
		}
	}
	moduleOK := relative || f.checkModuleQuiet(m)
	if !moduleOK {
		f.checkModule(mod, m)
	}
	for c := t.node(i).FirstChild; c >= 0; c = t.node(c).NextSibling {
		if t.fieldOf(c) != f.f.name {
			switch {
			case t.kind(c) != pyWildcard:
			case !moduleOK:
				f.add(RuleForbiddenImport, c, fmt.Sprintf("wildcard import from %s pulls in a forbidden module", m), importHint(m))
			case !relative && f.hasForbiddenFunctions(m):
				f.add(RuleForbiddenFunction, c, fmt.Sprintf("a wildcard import from %s brings in its forbidden functions unseen", m),
					fmt.Sprintf("import %s and call its functions as %s.name", m, m))
			}
			continue
		}
		n := c
		if t.kind(c) == pyAliasedImport {
			n = t.child(c, f.f.name)
		}
		name := f.dotted(n)
		switch {
		case isDunder(name) && !f.allowedDunders[name]:
			f.add(RuleIntrospection, n, fmt.Sprintf("importing %s reaches interpreter internals", name), dunderHint(name))
		case relative:
		case f.reexportsF.mayHave(name) && f.reexports[name] != "":
			if rm, ok := f.reexported(name); ok {
				f.add(RuleModuleReexport, n, reexportMessage(name, rm), importHint(rm))
			}
		case isPrivate(rootOf(name)):
			f.add(RulePrivateAttribute, n, fmt.Sprintf("%s is a private name of module %s", name, m),
				"use only the public API of the module; private names can reach forbidden modules")
		case moduleOK && f.forbiddenFunction(m+"."+name):
			f.addForbiddenFunction(n, m+"."+name)
		case moduleOK && f.policy.Mode == ModeDeny:
			full := m + "." + name
			if _, bad := matchModule(full, f.policy.Python.ForbiddenModules); bad {
				f.add(RuleForbiddenImport, n, fmt.Sprintf("module %s is forbidden", full), importHint(full))
			} else if f.forbiddenRoots[name] {
				f.add(RuleModuleReexport, n, f.throughMessage(name, name, m), f.throughHint(name))
			}
		}
	}
}

// checkModuleQuiet reports whether module m may be imported.
func (f *pyFile) checkModuleQuiet(m string) bool {
	if f.policy.Mode == ModeAllow {
		_, ok := matchModule(m, f.policy.Python.AllowedModules)
		return ok || m == "__future__"
	}
	_, bad := matchModule(m, f.policy.Python.ForbiddenModules)
	return !bad
}

// checkModule reports module m, imported at node i, when it is not allowed.
func (f *pyFile) checkModule(i int32, m string) {
	if f.checkModuleQuiet(m) {
		return
	}
	if f.policy.Mode == ModeAllow {
		f.add(RuleImportNotAllowed, i, fmt.Sprintf("module %s is not in the allowed list", m),
			"use only the allowed modules: "+shortList(f.policy.Python.AllowedModules))
		return
	}
	f.add(RuleForbiddenImport, i, fmt.Sprintf("module %s is forbidden", m), importHint(m))
}

func shortList(l []string) string {
	const max = 12
	s := ""
	for i, x := range l {
		if i == max {
			return s + ", ..."
		}
		if i > 0 {
			s += ", "
		}
		s += x
	}
	return s
}
