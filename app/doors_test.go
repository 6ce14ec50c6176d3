package app

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestDoorsAreTransports: the HTTP and MCP servers decode, call app and
// encode; what turns a request into work is app's, so they import none of
// the packages that do it, nor each other (their tests may).
func TestDoorsAreTransports(t *testing.T) {
	forbidden := []string{"agent", "egress", "kernel", "session", "llm/providers", "sandbox/backends", "sandbox/ratelimit"}
	doors := map[string]string{"server": "mcpserver", "mcpserver": "server"}
	for door, other := range doors {
		files, err := filepath.Glob(filepath.Join("..", door, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: no files (%v)", door, err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			ast, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range ast.Imports {
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
			}
		}
	}
}
