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
	// Name is the canonical name: python, javascript or bash.
	Name string
	// Ext is the file extension of a program, with the dot.
	Ext string
	// Extensions are all extensions recognised for the language.
	Extensions []string
	// Aliases are other names accepted for the language.
	Aliases []string
	// Interpreter runs a program file inside the sandbox.
	Interpreter []string
	// Env is added to the sandbox environment for this language.
	Env map[string]string
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
}

// Describe names the languages and their aliases, for help texts and
// schemas: "python (py, python3), javascript (js, node) or bash (sh)".
func Describe() string {
	var parts []string
	for _, l := range languages {
		parts = append(parts, l.Name+" ("+strings.Join(l.Aliases, ", ")+")")
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " or " + parts[len(parts)-1]
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
	return Language{}, fmt.Errorf("unknown language %q (want python, javascript or bash)", name)
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
	return Language{}, fmt.Errorf("cannot tell the language of %q from its extension: use --lang python, javascript or bash", filename)
}
