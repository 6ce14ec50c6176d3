// Package lang knows the languages codeagent runs: how a program file is
// named and which command runs it inside the sandbox.
package lang

import (
	"fmt"
	"path/filepath"
	"strings"
)

// Language is one supported programming language.
type Language struct {
	// Name is the canonical name: python, javascript, bash or go.
	Name string
	// Ext is the file extension of a program, with the dot.
	Ext string
	// Extensions are all extensions recognised for the language.
	Extensions []string
	// Aliases are other names accepted for the language.
	Aliases []string
	// Interpreter runs a program file inside the sandbox.
	Interpreter []string
	// NeedsExt says the command runs only a file named with Ext (go run).
	NeedsExt bool
	// Env is added to the sandbox environment for this language.
	Env map[string]string
	// CacheEnv is added on top of Env where the environment keeps a build
	// cache between its executions (a session's or a run's own workspace,
	// see CacheDir): variables that point the cache below it.
	CacheEnv map[string]string
}

// CacheDir is the directory, at the top of a workspace, where languages
// keep their build caches between the executions of one session or run
// (Go's GOCACHE). The workspace package leaves it out of listings,
// snapshots and a folder's changes; it is never copied from a folder.
const CacheDir = ".codeagent-cache"

// OwnDir is the directory, at the top of a workspace, where codeagent
// keeps its own files: the program it runs (solution.py and the like), its
// tests and its scratch files, so that they never take a name of the
// user's folder. The workspace package leaves it out of listings,
// snapshots and a folder's changes, as CacheDir.
const OwnDir = ".codeagent"

// cachePath is CacheDir as the program sees it (the workspace is
// /workspace, see sandbox.WorkspacePath).
const cachePath = "/workspace/" + CacheDir

// Environ is the environment l adds to the sandbox's: Env, and CacheEnv
// on top when cached.
func (l Language) Environ(cached bool) map[string]string {
	env := make(map[string]string, len(l.Env)+len(l.CacheEnv))
	for k, v := range l.Env {
		env[k] = v
	}
	if cached {
		for k, v := range l.CacheEnv {
			env[k] = v
		}
	}
	return env
}

// Command returns the argv that runs the program at path.
func (l Language) Command(path string) []string {
	return append(append([]string(nil), l.Interpreter...), path)
}

var languages = []Language{
	{
		Name: "python", Ext: ".py", Extensions: []string{".py"}, Aliases: []string{"py", "python3"},
		Interpreter: []string{"python3"},
		Env: map[string]string{
			"MPLBACKEND":              "Agg", // no display in the sandbox
			"PYTHONDONTWRITEBYTECODE": "1",   // keep the workspace clean
			"PYTHONUNBUFFERED":        "1",   // keep stdout and stderr in order
		},
	},
	{
		Name: "javascript", Ext: ".js", Extensions: []string{".js", ".mjs", ".cjs"}, Aliases: []string{"js", "node"},
		Interpreter: []string{"node"},
	},
	{
		Name: "bash", Ext: ".sh", Extensions: []string{".sh", ".bash"}, Aliases: []string{"sh"},
		Interpreter: []string{"bash"},
	},
	{
		// Debian's golang-go: its standard library is precompiled, and a
		// program builds from the standard library alone (no network).
		Name: "go", Ext: ".go", Extensions: []string{".go"}, Aliases: []string{"golang"},
		Interpreter: []string{"go", "run"}, NeedsExt: true,
		Env: map[string]string{
			"GOCACHE":     "/tmp/go-build", // a one-shot execution builds cold
			"GOPATH":      "/tmp/go",
			"GOFLAGS":     "-mod=mod",
			"GOTOOLCHAIN": "local", // never fetch another toolchain
			"GOPROXY":     "off",   // no network: nothing to download
			"GOSUMDB":     "off",
			"CGO_ENABLED": "0", // no C compiler needed, no cgo
		},
		CacheEnv: map[string]string{"GOCACHE": cachePath + "/go-build"},
	},
}

// Describe names the languages and their aliases, for help texts and
// schemas: "python (py, python3), javascript (js, node), bash (sh) or go
// (golang)".
func Describe() string {
	var parts []string
	for _, l := range languages {
		parts = append(parts, l.Name+" ("+strings.Join(l.Aliases, ", ")+")")
	}
	return JoinOr(parts)
}

// names lists the canonical names: "python, javascript, bash or go".
func names() string {
	var n []string
	for _, l := range languages {
		n = append(n, l.Name)
	}
	return JoinOr(n)
}

// JoinOr joins items as "a, b or c" ("a" alone), for messages that name
// choices.
func JoinOr(items []string) string {
	if len(items) < 2 {
		return strings.Join(items, "")
	}
	return strings.Join(items[:len(items)-1], ", ") + " or " + items[len(items)-1]
}

// All returns the supported languages.
func All() []Language { return append([]Language(nil), languages...) }

// Lookup returns the language called name (or one of its aliases).
func Lookup(name string) (Language, error) {
	n := strings.ToLower(strings.TrimSpace(name))
	for _, l := range languages {
		if l.Name == n {
			return l, nil
		}
		for _, a := range l.Aliases {
			if a == n {
				return l, nil
			}
		}
	}
	return Language{}, fmt.Errorf("unknown language %q (want %s)", name, names())
}

// Detect returns the language of a file from its extension.
func Detect(filename string) (Language, error) {
	ext := strings.ToLower(filepath.Ext(filename))
	for _, l := range languages {
		for _, e := range l.Extensions {
			if e == ext {
				return l, nil
			}
		}
	}
	return Language{}, fmt.Errorf("cannot tell the language of %q from its extension: use --lang %s", filename, names())
}
