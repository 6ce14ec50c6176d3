package app

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestDoorsAreTransports: the HTTP and MCP servers decode, call app and
// encode; what turns a request into work is app's, so they import none of
// the packages that do it, nor each other (their tests may). Of agent and
// kernel, whose types they encode where those types live (events,
// results, approvals, cells), they use types and constants only: no
// function or variable of theirs.
func TestDoorsAreTransports(t *testing.T) {
	forbidden := []string{"egress", "session", "llm/providers", "sandbox/backends", "sandbox/ratelimit"}
	typesOnly := map[string]map[string]bool{"agent": funcsAndVars(t, "agent"), "kernel": funcsAndVars(t, "kernel")}
	doors := map[string]string{"server": "mcpserver", "mcpserver": "server"}
	for door, other := range doors {
		for _, src := range sourceFiles(t, filepath.Join("..", door), false) {
			f, file := src.name, src.file
			local := map[string]map[string]bool{} // the file's name of agent or kernel
			for _, imp := range file.Imports {
				path, _ := strconv.Unquote(imp.Path.Value)
				rel, ok := strings.CutPrefix(path, "github.com/codeagent/codeagent/")
				if !ok {
					continue
				}
				for _, bad := range append(forbidden, other) {
					if rel == bad {
						t.Errorf("%s imports %s: that work belongs in app", f, path)
					}
				}
				if names, ok := typesOnly[rel]; ok {
					name := rel
					if imp.Name != nil {
						name = imp.Name.Name
					}
					local[name] = names
				}
			}
			ast.Inspect(file, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if x, ok := sel.X.(*ast.Ident); ok && local[x.Name][sel.Sel.Name] {
					t.Errorf("%s uses %s.%s: a door uses agent's and kernel's types, app does their work", f, x.Name, sel.Sel.Name)
				}
				return true
			})
		}
	}
}

// funcsAndVars names the package-level functions and variables of the
// codeagent package rel.
func funcsAndVars(t *testing.T, rel string) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	for _, src := range sourceFiles(t, filepath.Join("..", rel), false) {
		for _, d := range src.file.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil {
					names[d.Name.Name] = true
				}
			case *ast.GenDecl:
				if d.Tok != token.VAR {
					continue
				}
				for _, spec := range d.Specs {
					for _, n := range spec.(*ast.ValueSpec).Names {
						names[n.Name] = true
					}
				}
			}
		}
	}
	if !names["New"] && !names["NewSession"] {
		t.Fatalf("%s: found none of its functions (%d names)", rel, len(names))
	}
	return names
}

// sourceFile is a parsed Go file of a package, tests left out.
type sourceFile struct {
	name string
	fset *token.FileSet
	file *ast.File
}

// sourceFiles parses the Go files of the package in dir, its tests only
// when tests is set.
func sourceFiles(t *testing.T, dir string, tests bool) []sourceFile {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(names) == 0 {
		t.Fatalf("%s: no files (%v)", dir, err)
	}
	var out []sourceFile
	for _, name := range names {
		if !tests && strings.HasSuffix(name, "_test.go") {
			continue
		}
		fset := token.NewFileSet()
		file, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, sourceFile{name, fset, file})
	}
	return out
}
