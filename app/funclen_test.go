package app

import (
	"go/ast"
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
		for _, src := range sourceFiles(t, dir, false) {
			f, fset := src.name, src.fset
			ast.Inspect(src.file, func(n ast.Node) bool {
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
