package warm

import (
	"strings"

	"github.com/codeagent/codeagent/sandbox"
)

// Bounds of the programs that run warm.
const (
	minMemory = 192 << 20 // a smaller memory limit runs cold: the stack takes ~90 MiB
	minProcs  = 16        // the interpreter has a few threads already
)

// startupVars are environment variables that the interpreter or the
// stack's libraries read when they start or are imported: a warm
// interpreter started with the default environment, so a spec that sets
// any of them differently runs cold.
var startupVars = []string{"PYTHON", "LC_", "LANG", "HOME", "TMPDIR", "PATH", "TZ", "MPL", "OPENBLAS", "OMP_",
	"MKL_", "GOTO", "NUMEXPR", "BLIS", "XDG_", "FONTCONFIG", "LD_", "MALLOC", "GLIBC_TUNABLES", "PANDAS", "NUMPY"}

func startupVar(k string) bool {
	for _, p := range startupVars {
		if strings.HasPrefix(k, p) {
			return true
		}
	}
	return false
}

// Args returns the interpreter's arguments when spec can run in a warm
// interpreter: python3 FILE, -m MODULE or -c CODE with arguments; no
// network (a warm sandbox has none); imports that may use the stack (see
// Helps); every file below /code; limits that
// leave room for the preloaded stack; and the environment a warm
// interpreter started with where it matters. environ is the backend's
// complete environment of a program whose Spec.Env is env (its defaults
// with env over them), as KEY=VALUE. Whether the backend can run anything
// warm at all (root, cgroups) is the backend's to say before it asks.
func Args(spec sandbox.Spec, lim sandbox.Limits, environ func(env map[string]string) []string) ([]string, bool) {
	if spec.Network != nil || spec.Gateway != nil || len(spec.Binds) > 0 {
		return nil, false // a warm sandbox has no network, nor binds
	}
	if !Helps(spec.Imports) {
		return nil, false
	}
	c := spec.Command
	if len(c) < 2 || c[0] != "python3" {
		return nil, false
	}
	switch a := c[1]; {
	case a == "-m" || a == "-c":
		if len(c) < 3 {
			return nil, false
		}
	case !strings.HasPrefix(a, "/"):
		return nil, false
	}
	for _, f := range spec.Files {
		if !strings.HasPrefix(f.Path, "/code/") || f.Path == loaderPath {
			return nil, false
		}
	}
	if lim.Memory < minMemory || lim.Processes < minProcs {
		return nil, false
	}
	want := environ(Env())
	have := environ(spec.Env)
	startup := func(env []string) string {
		var keep []string
		for _, kv := range env {
			if k, _, _ := strings.Cut(kv, "="); startupVar(k) {
				keep = append(keep, kv)
			}
		}
		return strings.Join(keep, "\x00")
	}
	if startup(want) != startup(have) {
		return nil, false
	}
	return c[1:], true
}

// StartupFiles are the workspace files the stack reads at import, from
// the working directory: a program whose workspace holds one runs cold.
func StartupFiles() []string { return []string{"matplotlibrc"} }

// LeavesRoom reports whether an interpreter that holds held bytes leaves
// a program enough of the memory limit: the program's limit counts what
// the interpreter holds.
func LeavesRoom(held, memoryLimit int64) bool { return held <= memoryLimit*3/4 }
