package safety

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDefaultPolicyValid(t *testing.T) {
	p := DefaultPolicy()
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	if p.Mode != ModeDeny {
		t.Fatalf("mode %q", p.Mode)
	}
	// The minimum lists (os and sys are allowed since issue 43,
	// their dangerous functions forbidden).
	for _, m := range strings.Fields("subprocess socket ctypes cffi multiprocessing threading pty importlib builtins pickle marshal shelve code codeop runpy inspect gc http urllib requests httpx aiohttp ftplib smtplib telnetlib mmap") {
		if _, ok := matchModule(m, p.Python.ForbiddenModules); !ok {
			t.Errorf("default policy does not forbid %s", m)
		}
	}
	a := newPythonAnalyser(p, &parserPool{g: pythonGrammar()})
	for _, fn := range strings.Fields("os.system os.popen os.execv os.execvpe os.spawnl os.posix_spawn os.fork os.forkpty os.kill os.killpg os.setuid os.setgid os.setsid os.chroot sys.modules sys.settrace") {
		if !a.forbiddenFunction(fn) {
			t.Errorf("default policy does not forbid %s", fn)
		}
	}
	for _, fn := range strings.Fields("os.path os.listdir os.makedirs os.getcwd os.environ os.getenv sys.argv sys.exit sys.stdin os.systemx os.path.exists") {
		if a.forbiddenFunction(fn) {
			t.Errorf("default policy forbids %s", fn)
		}
	}
	for _, b := range strings.Fields("exec eval compile __import__ breakpoint input globals locals vars") {
		if !newSet(p.Python.ForbiddenBuiltins)[b] {
			t.Errorf("default policy does not forbid builtin %s", b)
		}
	}
	// DefaultPolicy returns a fresh copy each time.
	p.Python.ForbiddenModules = nil
	if len(DefaultPolicy().Python.ForbiddenModules) == 0 {
		t.Fatal("DefaultPolicy shares state between calls")
	}
}

func TestParsePolicyOverrides(t *testing.T) {
	p, err := ParsePolicy([]byte("mode: allow\npython:\n  allowed_modules: [math]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if p.Mode != ModeAllow || len(p.Python.AllowedModules) != 1 {
		t.Fatalf("got mode %q allowed %v", p.Mode, p.Python.AllowedModules)
	}
	if len(p.Python.ForbiddenBuiltins) == 0 || len(p.JavaScript.ForbiddenGlobals) == 0 {
		t.Fatal("keys absent from the override must keep their defaults")
	}
}

func TestParsePolicyErrors(t *testing.T) {
	cases := []struct {
		yaml, field string
	}{
		{"mode: maybe\n", "mode"},
		{"disable: [no-such-rule]\n", "disable[0]"},
		{"python:\n  forbidden_modules: [\"os;rm\"]\n", "python.forbidden_modules[0]"},
		{"python:\n  deserializers: [{call: loads}]\n", "python.deserializers[0].call"},
		{"python:\n  deserializers: [{call: a.b, safe_values: [x]}]\n", "python.deserializers[0].keyword"},
		{"files:\n  allowed_absolute: [tmp]\n", "files.allowed_absolute[0]"},
		{"max_input_bytes: -1\n", "max_input_bytes"},
		{"bash:\n  forbidden_commands: [\"rm -rf\"]\n", "bash.forbidden_commands[0]"},
		{"python:\n  reexported_functions: [{name: asyncio.run, module: subprocess}]\n", "python.reexported_functions[0].name"},
		{"python:\n  reexported_functions: [{name: spawn, module: \"\"}]\n", "python.reexported_functions[0].module"},
		{"python:\n  forbidden_functions: [system]\n", "python.forbidden_functions[0]"},
		{"environment_names: [\"A=B\"]\n", "environment_names[0]"},
		{"go:\n  forbidden_methods: [\"Kill()\"]\n", "go.forbidden_methods[0]"},
	}
	for _, c := range cases {
		_, err := ParsePolicy([]byte(c.yaml))
		var fe *FieldError
		if !errors.As(err, &fe) {
			t.Errorf("%q: want a *FieldError, got %v", c.yaml, err)
			continue
		}
		if fe.Field != c.field {
			t.Errorf("%q: field %q, want %q (%v)", c.yaml, fe.Field, c.field, err)
		}
	}
	// Unknown keys and malformed YAML are errors too.
	for _, bad := range []string{"colour: red\n", "python:\n  forbiden_modules: [os]\n", "mode: [\n"} {
		if _, err := ParsePolicy([]byte(bad)); err == nil {
			t.Errorf("%q: want an error", bad)
		}
	}
}

func TestLoadPolicy(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "p.yaml")
	if err := os.WriteFile(path, []byte("disable: [unbounded-loop]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := LoadPolicy(path)
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(p)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if r := check(t, c, Python, "while True:\n    pass\n"); !r.Safe() {
		t.Fatalf("disabled rule still reported: %v", r.Findings)
	}
	if _, err := LoadPolicy(filepath.Join(dir, "missing.yaml")); err == nil {
		t.Fatal("want an error for a missing file")
	}
}

func TestAllowMode(t *testing.T) {
	p, err := ParsePolicy([]byte("mode: allow\npython:\n  allowed_modules: [math, numpy]\njavascript:\n  allowed_modules: [path]\n"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(p)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for code, want := range map[string]bool{
		"import math\n":                        true,
		"import numpy.linalg as la\n":          true,
		"from numpy import array\n":            true,
		"from __future__ import annotations\n": true,
		"from . import helpers\n":              true,
		"import json\n":                        false,
		"from collections import Counter\n":    false,
		"import mathx\n":                       false,
	} {
		r := check(t, c, Python, code)
		if r.Safe() != want {
			t.Errorf("%q: safe=%v, want %v: %v", code, r.Safe(), want, r.Findings)
		}
		if !want && !hasRule(r, RuleImportNotAllowed) {
			t.Errorf("%q: want %s, got %v", code, RuleImportNotAllowed, r.Findings)
		}
	}
	if r := check(t, c, JavaScript, "const fs = require('fs');\n"); !hasRule(r, RuleImportNotAllowed) {
		t.Errorf("js allow mode: %v", r.Findings)
	}
	// The other rules still apply in allow mode.
	if r := check(t, c, Python, "import math\neval('1')\n"); !hasRule(r, RuleForbiddenBuiltin) {
		t.Errorf("allow mode lost the builtin rule: %v", r.Findings)
	}
}

// TestReexportedFunctionsFollowTheirModule: asyncio's process functions are
// reported while subprocess is forbidden, and no longer once a policy
// allows it.
func TestReexportedFunctionsFollowTheirModule(t *testing.T) {
	code := "import asyncio\nasyncio.create_subprocess_exec('id')\n"
	if r := check(t, newTestChecker(t), Python, code); !hasRule(r, RuleModuleReexport) {
		t.Errorf("default policy: %v", r.Findings)
	}
	p, err := ParsePolicy([]byte("python:\n  forbidden_modules: [os]\n"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(p)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if r := check(t, c, Python, code); !r.Safe() {
		t.Errorf("subprocess allowed: %v", r.Findings)
	}
}

// TestPolicyEnvironmentAndFunctions: a deployment that passes a variable
// lists it in environment_names, and programs may then read it by name;
// python.forbidden_functions takes qualified names and prefixes of the
// deployment's own.
func TestPolicyEnvironmentAndFunctions(t *testing.T) {
	read := "import os\nprint(os.environ['MY_TOKEN'], os.getenv('HOME'))\n"
	js := "console.log(process.env.MY_TOKEN);\n"
	c := newTestChecker(t)
	if r := check(t, c, Python, read); !hasRule(r, RuleEnvironmentAccess) {
		t.Errorf("a variable the default policy does not list: %v", r.Findings)
	}
	p, err := ParsePolicy([]byte("environment_names: [HOME, MY_TOKEN]\npython:\n  forbidden_functions: [os.remove, \"os.rm*\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	c, err = New(p)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if r := check(t, c, Python, read); !r.Safe() {
		t.Errorf("a listed variable: %v", r.Findings)
	}
	if r := check(t, c, JavaScript, js); !r.Safe() {
		t.Errorf("a listed variable in node: %v", r.Findings)
	}
	if r := check(t, c, Python, "import os\nos.remove('a')\nos.rmdir('b')\nos.system('id')\n"); len(r.Findings) != 2 ||
		r.Findings[0].Rule != RuleForbiddenFunction || r.Findings[1].Rule != RuleForbiddenFunction {
		t.Errorf("the policy's own forbidden functions (and only those): %v", r.Findings)
	}
}
