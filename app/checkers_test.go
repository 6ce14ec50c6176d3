package app

import (
	"context"
	"errors"
	"go/ast"
	"strconv"
	"strings"
	"testing"

	"github.com/codeagent/codeagent/safety"
	"github.com/codeagent/codeagent/sandbox"
)

// TestDoorsAskAppForCheckers: checkers are made in one place, app
// (NewChecker, Checkers.Open), which also says who closes them; no file of
// the command line, the HTTP server or the MCP server, tests included,
// calls safety.New itself.
func TestDoorsAskAppForCheckers(t *testing.T) {
	for _, dir := range []string{"../cmd/codeagent", "../server", "../mcpserver"} {
		for _, src := range sourceFiles(t, dir, true) {
			f, fset, file := src.name, src.fset, src.file
			name := safetyImport(file)
			if name == "" {
				continue
			}
			if name == "." {
				t.Errorf("%s dot-imports safety: its New would not show", f)
				continue
			}
			ast.Inspect(file, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok || sel.Sel.Name != "New" {
					return true
				}
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == name {
					t.Errorf("%s: uses safety.New: ask app for the checker (app.NewChecker, app.Checkers.Open)", fset.Position(sel.Pos()))
				}
				return true
			})
		}
	}
}

// safetyImport is the name file imports package safety under, "" when it
// does not.
func safetyImport(file *ast.File) string {
	for _, imp := range file.Imports {
		if path, _ := strconv.Unquote(imp.Path.Value); path != "github.com/codeagent/codeagent/safety" {
			continue
		}
		if imp.Name == nil {
			return "safety"
		}
		if imp.Name.Name == "_" {
			return ""
		}
		return imp.Name.Name
	}
	return ""
}

// TestNewCheckerInvalidPolicy: an invalid policy is the caller's to fix
// (class Invalid: `codeagent check` exits 2), says "invalid policy" and
// keeps the policy's own error for errors.As.
func TestNewCheckerInvalidPolicy(t *testing.T) {
	p := safety.DefaultPolicy()
	p.Mode = "sometimes"
	c, err := NewChecker(p)
	if c != nil || err == nil {
		t.Fatalf("NewChecker: %v %v", c, err)
	}
	var fe *safety.FieldError
	if d := Describe(err); d.Class != Invalid || !strings.HasPrefix(err.Error(), "invalid policy: ") || !errors.As(err, &fe) || fe.Field != "mode" {
		t.Fatalf("error %q, class %s, field error %v", err, d.Class, fe)
	}
	c, err = NewChecker(nil)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
}

// TestCheckersOpen: Open builds the plain checker from the policy only
// when the door gave none, and Close may be called twice; the checker of
// programs with a network still comes from Policy.
func TestCheckersOpen(t *testing.T) {
	ctx := context.Background()
	code := []byte("exec('print(1)')\n")
	lenient := func() (*safety.Policy, error) {
		p := safety.DefaultPolicy()
		p.Disable = []string{"forbidden-builtin"}
		return p, nil
	}
	cs := &Checkers{Policy: lenient}
	if err := cs.Open(lenient); err != nil {
		t.Fatal(err)
	}
	for _, nw := range []*sandbox.Network{nil, {}} {
		c, err := cs.For(nw)
		if err != nil {
			t.Fatal(err)
		}
		if rep, err := c.Check(ctx, safety.Python, code); err != nil || !rep.Safe() {
			t.Fatalf("network %v: the policy's disabled rule found: %+v %v", nw, rep.Findings, err)
		}
	}
	cs.Close()
	cs.Close()

	given, err := NewChecker(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer given.Close()
	called := false
	cs = &Checkers{Plain: given}
	if err := cs.Open(func() (*safety.Policy, error) { called = true; return nil, errors.New("no") }); err != nil || called || cs.Plain != given {
		t.Fatalf("Open with a checker given: %v, policy called %v", err, called)
	}
	cs.Close()
	if rep, err := given.Check(ctx, safety.Python, code); err != nil || rep.Safe() {
		t.Fatalf("the door's own checker after Close: %+v %v", rep, err)
	}

	bad := errors.New("agent.policy: bad")
	cs = &Checkers{}
	if err := cs.Open(func() (*safety.Policy, error) { return nil, bad }); !errors.Is(err, bad) || cs.Plain != nil {
		t.Fatalf("Open with a failing policy: %v", err)
	}
}
