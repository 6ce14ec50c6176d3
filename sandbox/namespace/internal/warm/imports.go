package warm

import (
	_ "embed"
	"strings"
	"sync"
)

// stdlib.txt is Python's sys.stdlib_module_names (3.11), one per line.
//
//go:embed stdlib.txt
var stdlibText string

var stdlib = sync.OnceValue(func() map[string]bool {
	m := map[string]bool{}
	for _, name := range strings.Fields(stdlibText) {
		m[name] = true
	}
	return m
})

// Helps reports whether a program that imports imports (its top-level
// modules, see sandbox.Spec.Imports; nil when unknown) may use what a warm
// interpreter imported ahead: unless it imports only modules of Python's
// standard library, which never import pandas, numpy or matplotlib. A
// module outside it may be the stack, a library built on it, or one of the
// workspace's own modules importing it. A program that would not use the
// stack runs cold (in a plain warm sandbox, see namespace.Config.Warm),
// leaving the interpreters, and the CPU their refill costs, to the programs
// that need them.
func Helps(imports []string) bool {
	if imports == nil {
		return true
	}
	std := stdlib()
	for _, m := range imports {
		if !std[m] {
			return true
		}
	}
	return false
}
