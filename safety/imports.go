package safety

import (
	"context"
	"runtime"
	"slices"
	"sync"

	"github.com/codeagent/codeagent/safety/internal/tsparse"
)

// maxImportsInput is the largest program PythonImports parses: past it the
// list is reported unknown rather than paid for on every execution.
const maxImportsInput = 256 << 10

// importsPool parses for PythonImports, apart from any Checker's.
var importsPool = sync.OnceValue(func() *parserPool {
	return newParserPool(pythonGrammar(), runtime.GOMAXPROCS(0), memBudget(DefaultPolicy()))
})

// PythonImports returns the top-level modules a Python program imports
// (its import and from-import statements anywhere in the file, relative
// imports left out), sorted, and whether the list is all it can import
// by itself: known is false for a syntax error, a program over 256 KiB,
// or one that can import by a name computed at run time (__import__,
// importlib, exec, eval, compile). A module the program imports may import
// others in turn; the list is a hint for choosing how to start the program
// (see sandbox.Spec.Imports), never a rule about what it may import.
func PythonImports(ctx context.Context, code []byte) (modules []string, known bool) {
	if len(code) > maxImportsInput {
		return nil, false
	}
	pool := importsPool()
	t, release, err := pool.parse(ctx, code)
	if err != nil {
		return nil, false
	}
	defer release()
	if tsparse.HasError(t.nodes) {
		return nil, false
	}
	name := pool.g.field("name")
	moduleName := pool.g.field("module_name")
	f := &pyFile{t: t}
	modules = []string{} // known and empty is not nil (unknown)
	add := func(m string) {
		m = rootOf(m)
		if !slices.Contains(modules, m) {
			modules = append(modules, m)
		}
	}
	for i := int32(0); i < int32(len(t.nodes)); i++ {
		switch t.kind(i) {
		case pyImport:
			for c := t.node(i).FirstChild; c >= 0; c = t.node(c).NextSibling {
				switch t.kind(c) {
				case pyDottedName:
					add(f.dotted(c))
				case pyAliasedImport:
					add(f.dotted(t.child(c, name)))
				}
			}
		case pyImportFrom:
			if mod := t.child(i, moduleName); t.kind(mod) == pyDottedName {
				add(f.dotted(mod))
			}
		case pyIdentifier:
			switch normIdent(t.text(i)) {
			case "__import__", "importlib", "exec", "eval", "compile":
				return nil, false
			}
		case pyExecStatement:
			return nil, false
		}
	}
	slices.Sort(modules)
	return modules, true
}

// ImportsHint is sandbox.Spec.Imports for a program in language (a
// canonical name): PythonImports' list when known, nil otherwise (unknown,
// or not Python).
func ImportsHint(ctx context.Context, language string, code []byte) []string {
	if language != "python" {
		return nil
	}
	if mods, known := PythonImports(ctx, code); known {
		return mods
	}
	return nil
}
