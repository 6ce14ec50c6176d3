package app

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// maxFuncLines bounds a function of app and the doors, from its func
// keyword to its closing brace: one that does not fit a screen does too
// much for a reader to follow.
const maxFuncLines = 100

// TestFunctionsFitAScreen: no function (nor function literal) of app, the
// command line, the HTTP server or the MCP server is longer than
// maxFuncLines; tests are not counted.
func TestFunctionsFitAScreen(t *testing.T) {
	for _, dir := range []string{".", "../cmd/codeagent", "../server", "../mcpserver"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: no files (%v)", dir, err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			fset := token.NewFileSet()
			file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(file, func(n ast.Node) bool {
				var body *ast.BlockStmt
				name := "a function literal"
				switch fn := n.(type) {
				case *ast.FuncDecl:
					body, name = fn.Body, fn.Name.Name
				case *ast.FuncLit:
					body = fn.Body
				}
				if body == nil {
					return true
				}
				start := fset.Position(n.Pos())
				if lines := fset.Position(body.Rbrace).Line - start.Line + 1; lines > maxFuncLines {
					t.Errorf("%s:%d: %s has %d lines (at most %d)", f, start.Line, name, lines, maxFuncLines)
				}
				return true
			})
		}
	}
}
