package safety

import (
	"context"
	"strconv"
	"strings"
	"testing"
)

// lintOf returns the lint warnings of code as "rule line message" lines.
func lintOf(t *testing.T, c *Checker, lang Language, code string) []string {
	t.Helper()
	r := check(t, c, lang, code)
	var out []string
	for _, f := range r.Lint {
		if f.Kind != KindLint {
			t.Errorf("lint finding %v has kind %q", f, f.Kind)
		}
		out = append(out, f.Rule+" "+strconv.Itoa(f.Line)+" "+f.Message)
	}
	return out
}

func TestLintPython(t *testing.T) {
	c := newTestChecker(t)
	cases := []struct {
		name, code string
		want       []string // each a substring of one warning, in order
	}{
		{"undefined name", "def f(x):\n    return x + totl\n", []string{"undefined-name 2 undefined name 'totl'"}},
		{"misspelled builtin", "print(lenn([1]))\n", []string{"undefined-name 1 undefined name 'lenn'"}},
		{"unused import", "import json\nimport math\nprint(math.pi)\n", []string{"unused-import 1 'json' imported but unused"}},
		{"unused from import", "from typing import List, Dict\nx: List[int] = []\n", []string{"unused-import 1 'typing.Dict' imported but unused"}},
		{"class body not seen from methods", "class A:\n    k = 1\n    def m(self):\n        return k\n", []string{"undefined-name 4 undefined name 'k'"}},
		{"comprehension variable does not leak", "xs = [i for i in range(3)]\nprint(i)\n", []string{"undefined-name 2 undefined name 'i'"}},
		{"redefinition", "def f():\n    return 1\n\ndef f():\n    return 2\n", []string{"redefined-unused 4 redefinition of unused 'f' from line 1"}},
		{"f-string without fields", "print(f\"done\")\n", []string{"fstring-missing-placeholders 1"}},
		{"is with a literal", "x = 'a'\nprint(x is 'a')\n", []string{"is-literal 2"}},
		{"lambda body", "g = lambda a: a + b\n", []string{"undefined-name 1 undefined name 'b'"}},
		// Must not warn.
		{"builtins and dunders", "print(len(__name__), __file__, NotImplemented, __doc__)\n", nil},
		{"later module binding", "def f():\n    return helper()\n\ndef helper():\n    return 1\n", nil},
		{"parameters, defaults and annotations", "N = 3\ndef f(a: int, *args, b=N, **kw) -> int:\n    return a + b + len(args) + len(kw)\n", nil},
		{"class scope from defaults and comprehensions", "class A:\n    N = 2\n    xs = [N * i for i in range(N)]\n    def f(self, n=N):\n        return n\n", nil},
		{"global and nonlocal", "def f():\n    global G\n    G = 1\n\ndef g():\n    x = 0\n    def h():\n        nonlocal x\n        x += 1\n    h()\n    return x\nf()\nprint(G)\n", nil},
		{"walrus in comprehension", "ys = [y for x in range(3) if (y := x * 2)]\nprint(y)\n", nil},
		{"except as and with as", "try:\n    pass\nexcept ValueError as e:\n    print(e)\nwith open('f') as fh:\n    print(fh)\n", nil},
		{"match captures", "def f(p):\n    match p:\n        case [a, *rest]:\n            return a, rest\n        case {'k': v}:\n            return v\n", nil},
		{"star import turns undefined-name off", "from math import *\nprint(pi, tau)\n", nil},
		{"NameError handler", "try:\n    unicode\nexcept NameError:\n    unicode = str\n", nil},
		{"import in __all__", "from json import dumps\n__all__ = ['dumps']\n", nil},
		{"future import", "from __future__ import annotations\nx = 1\n", nil},
		{"import in a class body is an attribute", "class M:\n    from json import dumps\n", nil},
		{"explicit re-export", "from json import dumps as dumps\n", nil},
		{"fallback import", "try:\n    import ujson as json\nexcept ImportError:\n    json = None\n", nil},
		{"string annotation", "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from decimal import Decimal\ndef f(x: 'Decimal') -> None:\n    pass\n", nil},
		{"decorated redefinition", "class A:\n    @property\n    def x(self):\n        return 1\n    @x.setter\n    def x(self, v):\n        pass\n", nil},
		{"used between definitions", "def f():\n    return 1\nprint(f())\ndef f():\n    return 2\n", nil},
		{"f-string with a field", "x = 1\nprint(f\"{x}\" f\"done\")\n", nil},
		{"is None", "x = None\nprint(x is None, x is not True)\n", nil},
		{"attributes and keywords are not names", "import json\nprint(json.dumps({}, indent=2).strip())\n", nil},
		{"syntax error: no lint", "def f(:\n    return undefined_thing\n", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := lintOf(t, c, Python, tc.code)
			if len(got) != len(tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("warning %d: got %q, want %q", i, got[i], w)
				}
			}
		})
	}
}

func TestLintJavaScript(t *testing.T) {
	c := newTestChecker(t)
	cases := []struct {
		name, code string
		want       []string
	}{
		{"undeclared read", "const xs = [1, 2];\nconsole.log(xs.map(x => x * factr));\n", []string{"undeclared-global 2 'factr' is not declared"}},
		{"undeclared assignment", "total = 0;\nconsole.log(total);\n", []string{"undeclared-global 1 'total' is assigned but never declared"}},
		{"shorthand property", "console.log({ missing });\n", []string{"undeclared-global 1 'missing' is not declared"}},
		// Must not warn.
		{"node globals", "const fs = require('fs');\nconsole.log(process.argv, __dirname, Buffer.from('a'), JSON.stringify(Math.PI), new Map());\nsetTimeout(() => {}, 1);\n", nil},
		{"declarations of every form", "import a, { b as c, d } from 'm';\nimport * as ns from 'n';\nconst { e, f: [g, ...h], i = 1 } = a;\nfunction k(l, { m }, n = 2, ...o) { return arguments.length + l + m + n + o; }\nclass P { q(r) { return r; } }\nfor (const s of [c, d, ns, e, g, h, i]) { try { k(s); } catch (err) { console.log(err); } }\nconst p = new P();\nvar fx = function named() { return named; };\nexport { p as pp, fx };\n", nil},
		{"hoisting", "main();\nfunction main() { console.log(later); }\nvar later = 1;\n", nil},
		{"typeof of an undeclared name", "if (typeof window !== 'undefined') { console.log('browser'); }\n", nil},
		{"labels and properties", "outer: for (let i = 0; i < 2; i++) { for (;;) { break outer; } }\nconst o = { key: 1 };\nconsole.log(o.key, o['key']);\n", nil},
		{"syntax error: no lint", "const x = ;\nconsole.log(y);\n", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := lintOf(t, c, JavaScript, tc.code)
			if len(got) != len(tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("warning %d: got %q, want %q", i, got[i], w)
				}
			}
		})
	}
}

// TestLintBash: bash has no lint of its own; its syntax errors are
// syntax-error findings, as before.
func TestLintBash(t *testing.T) {
	c := newTestChecker(t)
	if got := lintOf(t, c, Bash, "for f in *.txt; do\n  echo \"$f\"\ndone\n"); len(got) != 0 {
		t.Errorf("got %q", got)
	}
	if r := check(t, c, Bash, "if true; then\n  echo x\n"); !hasRule(r, RuleSyntaxError) {
		t.Errorf("unterminated if: got %v", r.Findings)
	}
}

// TestLintNeverUnsafe: lint warnings leave a report safe, and NoLint turns
// them off; a policy's disable list applies to lint rules too.
func TestLintNeverUnsafe(t *testing.T) {
	code := []byte("import json\nprint(undefined_thing)\n")
	c := newTestChecker(t)
	r, err := c.Check(context.Background(), Python, code)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Safe() || len(r.Findings) != 0 || len(r.Lint) != 2 {
		t.Errorf("safe=%v findings=%v lint=%v, want safe with 2 lint warnings", r.Safe(), r.Findings, r.Lint)
	}
	off := newTestChecker(t)
	off.NoLint = true
	if r, _ := off.Check(context.Background(), Python, code); r.Lint != nil {
		t.Errorf("NoLint: got %v", r.Lint)
	}
	p := DefaultPolicy()
	p.Disable = []string{RuleUnusedImport}
	d, err := New(p)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if r, _ := d.Check(context.Background(), Python, code); len(r.Lint) != 1 || r.Lint[0].Rule != RuleUndefinedName {
		t.Errorf("disable unused-import: got %v", r.Lint)
	}
}
