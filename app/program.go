package app

import (
	"context"
	"io"
	"maps"
	"strings"

	"github.com/codeagent/codeagent/internal/lazyre"
	"github.com/codeagent/codeagent/lang"
	"github.com/codeagent/codeagent/safety"
	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/workspace"
)

// MaxEnv is the most environment variables a client's program may set.
const MaxEnv = 64

// Program is one program to run once in a fresh sandbox, as every door
// asks for it: `codeagent exec`, POST /v1/exec, a session's fresh exec and
// MCP's execute_code. Its Spec is the one way such a program becomes a
// sandbox.Spec.
type Program struct {
	Lang lang.Language
	// Name is the program's file name under /code; "" is "main" with the
	// language's extension.
	Name    string
	Code    []byte
	Args    []string // the program's arguments
	Stdin   io.Reader
	Env     map[string]string // besides the language's own
	Limits  sandbox.Limits
	Network *sandbox.Network
	// Cache keeps the language's build cache (Go's) in the workspace's
	// lang.CacheDir between executions: for a session's workspace, whose
	// next program then builds warm; a one-shot execution builds cold.
	Cache bool
}

// Spec is p's sandbox.Spec with dir as its workspace: the program written
// under /code, run by its language's command in the language's
// environment with p's on top.
func (p Program) Spec(dir string) sandbox.Spec {
	name := p.Name
	if name == "" {
		name = "main" + p.Lang.Ext
	}
	path := "/code/" + name
	env := p.Lang.Environ(p.Cache)
	maps.Copy(env, p.Env)
	return sandbox.Spec{Command: append(p.Lang.Command(path), p.Args...), Workspace: dir, Files: []sandbox.File{{Path: path, Data: p.Code}},
		Env: env, Stdin: p.Stdin, Limits: p.Limits, Network: p.Network, Imports: safety.ImportsHint(context.Background(), p.Lang.Name, p.Code)}
}

var envName = lazyre.New(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)

// CheckEnv refuses a client's environment that has more than MaxEnv
// variables, a name that is not a shell identifier, or a NUL in a value.
func CheckEnv(env map[string]string) error {
	if len(env) > MaxEnv {
		return invalidf("at most %d environment variables", MaxEnv)
	}
	for k, v := range env {
		if !envName.MatchString(k) || strings.ContainsRune(v, 0) {
			return invalidf("invalid environment variable %q", k)
		}
	}
	return nil
}

// CheckFileNames refuses a file name a client may not give a file of a
// workspace (see CheckFileName).
func CheckFileNames[V any](files map[string]V) error {
	for name := range files {
		if err := CheckFileName(name); err != nil {
			return err
		}
	}
	return nil
}

// CheckFileName refuses a name a client may not give a file of a
// workspace (workspace.ValidName): anything but a plain name, so no
// directories and no links to follow. Every door that takes a file's name
// says it with this message.
func CheckFileName(name string) error {
	if !workspace.ValidName(name) {
		return invalidf("invalid file name %q: a plain name of at most 200 letters, digits, '.', '_', '-', '+' or spaces, "+
			"starting with a letter, digit or '_', no directories", name)
	}
	return nil
}
