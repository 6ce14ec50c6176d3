package safety

import (
	"strings"

	"github.com/codeagent/codeagent/lang"
	"github.com/codeagent/codeagent/sandbox"
)

// environmentNames is the set of environment variables a program in
// language may read by name: the policy's environment_names, the thread
// pool sizes the sandbox sets, and the language's own variables. These
// are what a run passes; the sandbox's environment holds nothing else, so
// a program learns nothing by reading another name, and reading the
// whole environment or a computed name is what could expose a variable a
// deployment passes without listing it.
func environmentNames(p *Policy, language string) set {
	s := newSet(p.EnvironmentNames, sandbox.ThreadVars)
	if l, err := lang.Lookup(language); err == nil {
		for k := range l.Environ(true) {
			s[k] = true
		}
	}
	return s
}

// envNotPassed is the message for reading a variable the run does not pass.
func envNotPassed(name string) string {
	return "reads " + name + ", a variable the run does not pass"
}

// envHint says what to do instead of reading the environment: read a
// variable the run passes, by name, as example shows
// (os.environ.get("HOME"), process.env.HOME).
func envHint(p *Policy, example string) string {
	return "read only a variable the run passes (" + shortList(p.EnvironmentNames) + ", the language's own), by name (" +
		example + "); pass other settings as arguments or in a file in the workspace"
}

// isEnvName reports whether s could name a variable (no spaces, =, NUL):
// a literal that is not one is a computed use in disguise.
func isEnvName(s string) bool {
	return s != "" && !strings.ContainsAny(s, "= \t\n\x00")
}

// checkEnv judges a use of process.env (node i): reading a variable the
// run passes by a literal name (process.env.HOME, process.env["HOME"])
// passes, as does setting or deleting one by name; anything else (the
// whole object, a computed name, another name) is reported.
func (f *jsFile) checkEnv(i int32) {
	t := f.t
	p := t.parent(i)
	name, named := "", false
	if t.fieldOf(i) == f.f.object {
		switch t.kind(p) {
		case jsMember:
			name, named = t.text(t.child(p, f.f.property)), true
		case jsSubscript:
			name, named = f.literal(t.child(p, f.f.index))
			if !named {
				f.add(RuleEnvironmentAccess, p, "process.env with a computed name can read any variable of the environment", f.envHint)
				return
			}
		}
	}
	if !named {
		f.add(RuleEnvironmentAccess, i, "process.env as a whole exposes every variable of the environment", f.envHint)
		return
	}
	g := t.parent(p)
	switch {
	case t.kind(g) == jsAssignment && t.fieldOf(p) == f.f.left:
		return // setting a variable
	case t.kind(g) == jsUnary && strings.HasPrefix(t.text(g), "delete"):
		return
	case !isEnvName(name):
		f.add(RuleEnvironmentAccess, p, "process.env with a computed name can read any variable of the environment", f.envHint)
	case !f.envNames[name]:
		f.add(RuleEnvironmentAccess, p, "process.env "+envNotPassed(name), f.envHint)
	}
}
