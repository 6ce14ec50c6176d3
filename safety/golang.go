package safety

import (
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/scanner"
	"go/token"
	"path"
	"strconv"
	"strings"
)

// goAnalyser applies the Go rules. No tree-sitter grammar for Go is among
// the checker's, so it parses with the standard library's go/parser, which
// keeps no state between parses (no pool).
type goAnalyser struct {
	policy  *Policy
	funcs   set // forbidden_functions, as "import/path.Name"
	env     set // environment_functions
	methods set // forbidden_methods
}

func newGoAnalyser(p *Policy) *goAnalyser {
	return &goAnalyser{policy: p, funcs: newSet(p.Go.ForbiddenFunctions), env: newSet(p.Go.EnvironmentFunctions),
		methods: newSet(p.Go.ForbiddenMethods)}
}

const goSyntaxHint = "fix the syntax at this line; the code must build with go run (package main with a func main)"

// goFileFunctions are the functions whose string arguments are paths.
var goFileFunctions = set{
	"os.Open": true, "os.OpenFile": true, "os.Create": true, "os.ReadFile": true, "os.WriteFile": true,
	"os.ReadDir": true, "os.Remove": true, "os.RemoveAll": true, "os.Mkdir": true, "os.MkdirAll": true,
	"os.Rename": true, "os.Chdir": true, "os.Chmod": true, "os.Chown": true, "os.Stat": true, "os.Lstat": true,
	"os.Truncate": true, "os.Symlink": true, "os.Link": true, "os.DirFS": true, "os.Chtimes": true,
	"os.Lchown": true, "os.Readlink": true, "os.MkdirTemp": true, "os.CreateTemp": true, "os.CopyFS": true,
	"os.OpenRoot": true, "os.OpenInRoot": true,
	"io/ioutil.ReadFile": true, "io/ioutil.WriteFile": true, "io/ioutil.ReadDir": true,
	"io/ioutil.TempDir": true, "io/ioutil.TempFile": true,
	"path/filepath.Walk": true, "path/filepath.WalkDir": true, "path/filepath.Glob": true,
	"path/filepath.EvalSymlinks": true,
}

func (a *goAnalyser) analyse(ctx context.Context, code []byte, out *collector) error {
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, "main.go", code, parser.SkipObjectResolution)
	var list scanner.ErrorList
	if errors.As(err, &list) {
		for _, e := range list[:min(len(list), 3)] {
			out.add(RuleSyntaxError, e.Pos.Offset, e.Pos.Offset+1, "invalid syntax: "+e.Msg, goSyntaxHint)
		}
	} else if err != nil {
		out.add(RuleSyntaxError, 0, 0, "invalid syntax: "+err.Error(), goSyntaxHint)
	}
	if file == nil {
		return ctx.Err()
	}
	f := &goFile{goAnalyser: a, fset: fset, out: out, names: map[string]string{}, strs: collectStrings(file)}
	for _, spec := range file.Imports {
		f.checkImport(spec)
	}
	called := map[*ast.SelectorExpr]int{} // a method selector called, with its argument count
	ast.Inspect(file, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.SelectorExpr:
			f.checkReference(n, called)
		case *ast.CallExpr:
			if sel, ok := n.Fun.(*ast.SelectorExpr); ok {
				called[sel] = len(n.Args)
			}
			f.checkPaths(n)
			f.checkMethodByName(n)
		}
		return true
	})
	return ctx.Err()
}

// goFile is the state of one check: the local names of the imports and
// what the file's names are given (for folding strings).
type goFile struct {
	*goAnalyser
	fset  *token.FileSet
	out   *collector
	names map[string]string // local name -> import path
	strs  goStrings
}

func (f *goFile) add(rule string, n ast.Node, msg, hint string) {
	f.out.add(rule, f.fset.Position(n.Pos()).Offset, f.fset.Position(n.End()).Offset, msg, hint)
}

// checkImport applies the package rules to one import and records its
// local name.
func (f *goFile) checkImport(spec *ast.ImportSpec) {
	p, err := strconv.Unquote(spec.Path.Value)
	if err != nil {
		return // go/parser reported it
	}
	g := &f.policy.Go
	switch {
	case matchPackage(g.ForbiddenPackages, p):
		f.add(RuleForbiddenImport, spec, fmt.Sprintf("package %s is forbidden", p), goImportHint(p))
	case f.policy.Mode == ModeAllow && !matchPackage(g.AllowedPackages, p):
		f.add(RuleImportNotAllowed, spec, fmt.Sprintf("package %s is not in the allowed list", p),
			"use only the allowed packages: "+shortList(g.AllowedPackages))
	}
	name := path.Base(p)
	if spec.Name != nil {
		name = spec.Name.Name
	}
	if name == "." && f.hasRules(p) {
		f.add(RuleForbiddenImport, spec, fmt.Sprintf("a dot import of %s hides which of its functions the code uses", p),
			"import "+p+" by name and call its functions as "+path.Base(p)+".Name")
	}
	f.names[name] = p
}

// hasRules reports whether a function of package p is forbidden.
func (f *goFile) hasRules(p string) bool {
	for k := range f.funcs {
		if strings.HasPrefix(k, p+".") {
			return true
		}
	}
	for k := range f.env {
		if strings.HasPrefix(k, p+".") {
			return true
		}
	}
	return false
}

// qualified returns "import/path.Name" for a selector on an imported
// package's local name, or "".
func (f *goFile) qualified(e ast.Expr) string {
	sel, ok := e.(*ast.SelectorExpr)
	if !ok {
		return ""
	}
	id, ok := sel.X.(*ast.Ident)
	if !ok {
		return ""
	}
	p, ok := f.names[id.Name]
	if !ok {
		return ""
	}
	return p + "." + sel.Sel.Name
}

// checkReference reports any reference (a call or a value) to a forbidden
// or environment function, and to a forbidden method of any value
// (p.Kill, (*T).Signal). called holds the selectors called so far (a
// call is seen before its function) with their argument counts.
func (f *goFile) checkReference(sel *ast.SelectorExpr, called map[*ast.SelectorExpr]int) {
	q := f.qualified(sel)
	switch {
	case q == "":
		if f.methods[sel.Sel.Name] && !f.isPackage(sel.X) {
			if n, ok := called[sel]; ok && n == 0 && sel.Sel.Name == "Signal" {
				return // sync.Cond's Signal takes no argument; os.Process's one
			}
			f.add(RuleForbiddenFunction, sel, "the method "+sel.Sel.Name+" is forbidden: it signals or reaches into other processes or the system",
				"do the work in Go itself; starting or signalling other programs is not allowed")
		}
	case f.funcs[q]:
		f.add(RuleForbiddenFunction, sel, q+" is forbidden", "do the work in Go itself; starting or signalling other programs is not allowed")
	case f.env[q]:
		f.add(RuleEnvironmentAccess, sel, q+" reads or changes the process environment",
			"pass values as arguments or read them from a file in the workspace")
	}
}

// isPackage reports whether e is an imported package's local name.
func (f *goFile) isPackage(e ast.Expr) bool {
	id, ok := e.(*ast.Ident)
	if !ok {
		return false
	}
	_, ok = f.names[id.Name]
	return ok
}

// checkPaths reports a file function's path that leaves the workspace:
// a literal, or one folded from constants, variables, + and Join
// ("/pr"+"oc/self/environ", a const, a Sprintf with a literal start).
func (f *goFile) checkPaths(call *ast.CallExpr) {
	if !goFileFunctions[f.qualified(call.Fun)] {
		return
	}
	for _, arg := range call.Args {
		for _, v := range f.values(arg, 0) {
			if why := pathOutside(v.s, v.exact, f.policy.Files.AllowedAbsolute); why != "" {
				f.add(RulePathOutside, arg, fmt.Sprintf("path %q is outside the workspace: %s", v.s, why), pathHint)
				break
			}
		}
	}
}

// checkMethodByName reports reflection that calls a forbidden method by
// name (v.MethodByName("Ki"+"ll")), or a method whose name is not known.
func (f *goFile) checkMethodByName(call *ast.CallExpr) {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != "MethodByName" || len(call.Args) != 1 || f.isPackage(sel.X) {
		return
	}
	for _, v := range f.values(call.Args[0], 0) {
		switch {
		case !v.exact:
			f.add(RuleDynamicAttribute, call, "MethodByName with a computed name can call any method",
				"call the method by its name, e.g. v.Name()")
			return
		case f.methods[v.s]:
			f.add(RuleForbiddenFunction, call, "MethodByName("+strconv.Quote(v.s)+") reaches a forbidden method",
				"do the work in Go itself; starting or signalling other programs is not allowed")
			return
		}
	}
}

// matchPackage reports whether import path p matches a pattern of list: a
// package, or with "/..." a package and every package below it (as the go
// command's patterns).
func matchPackage(list []string, p string) bool {
	for _, pat := range list {
		if pat == p {
			return true
		}
		if base, ok := strings.CutSuffix(pat, "/..."); ok && (p == base || strings.HasPrefix(p, base+"/")) {
			return true
		}
	}
	return false
}

// goImportHint says what to do instead of importing a forbidden package.
func goImportHint(p string) string {
	switch {
	case p == "net" || strings.HasPrefix(p, "net/") || p == "crypto/tls" || p == "log/syslog" || strings.HasPrefix(p, "golang.org/x/net"):
		return "the sandbox has no network; read the input files in the workspace instead"
	case p == "unsafe" || p == "C" || p == "runtime/cgo":
		return "write memory-safe Go: no unsafe, no cgo"
	case p == "os/exec" || p == "plugin":
		return "do the work in Go itself; starting other programs or loading plugins is not allowed"
	}
	return "do the work in Go itself with the standard library (fmt, strings, os for workspace files, ...)"
}
