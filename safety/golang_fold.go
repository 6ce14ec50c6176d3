package safety

import (
	"go/ast"
	"go/token"
	"path"
	"strconv"
	"strings"
)

// goValue is one value a string expression may have: its text, and
// whether that is all of it (false: only a prefix is known).
type goValue struct {
	s     string
	exact bool
}

// Bounds of folding: how deep expressions and names are followed, and how
// many values one expression may have (a name assigned in several places
// has each of their values).
const (
	maxFoldDepth  = 32
	maxFoldValues = 16
)

// goStrings records what each name of a file is given, so that a path or
// a name spelt through constants and variables is seen folded:
// const p = "/pr" + "oc/self/environ"; os.ReadFile(p). It does not follow
// scopes: every const, var, := and = of a name counts, wherever it is, so
// that a name given two values has both (a shadowing declaration cannot
// hide one). Names given something unknown have an unknown value too.
type goStrings map[string][]ast.Expr

// collectStrings records the values of the file's names.
func collectStrings(file *ast.File) goStrings {
	g := goStrings{}
	add := func(names []*ast.Ident, values []ast.Expr) {
		for i, n := range names {
			if n.Name == "_" {
				continue
			}
			var v ast.Expr // nil: unknown (a multi-value call, no value)
			if len(values) == len(names) {
				v = values[i]
			}
			g[n.Name] = append(g[n.Name], v)
		}
	}
	ast.Inspect(file, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.GenDecl:
			if n.Tok != token.CONST && n.Tok != token.VAR {
				return true
			}
			var last []ast.Expr // a const spec without values repeats the last
			for _, s := range n.Specs {
				vs, ok := s.(*ast.ValueSpec)
				if !ok {
					continue
				}
				values := vs.Values
				if n.Tok == token.CONST && len(values) == 0 {
					values = last
				}
				last = values
				add(vs.Names, values)
			}
		case *ast.AssignStmt:
			var names []*ast.Ident
			for _, l := range n.Lhs {
				if id, ok := l.(*ast.Ident); ok {
					names = append(names, id)
				} else {
					names = append(names, &ast.Ident{Name: "_"})
				}
			}
			values := n.Rhs
			if n.Tok != token.DEFINE && n.Tok != token.ASSIGN {
				values = nil // +=: unknown
			}
			add(names, values)
		case *ast.RangeStmt:
			for _, e := range []ast.Expr{n.Key, n.Value} {
				if id, ok := e.(*ast.Ident); ok {
					add([]*ast.Ident{id}, nil)
				}
			}
		}
		return true
	})
	return g
}

// values returns the values string expression e may have; an expression
// the checker cannot fold has the value "" (not exact).
func (f *goFile) values(e ast.Expr, depth int) []goValue {
	unknown := []goValue{{}}
	if depth > maxFoldDepth {
		return unknown
	}
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind != token.STRING {
			return unknown
		}
		if s, err := strconv.Unquote(e.Value); err == nil {
			return []goValue{{s, true}}
		}
	case *ast.ParenExpr:
		return f.values(e.X, depth+1)
	case *ast.BinaryExpr:
		if e.Op == token.ADD {
			return f.concat(f.values(e.X, depth+1), func() []goValue { return f.values(e.Y, depth+1) })
		}
	case *ast.Ident:
		var out []goValue
		for _, v := range f.strs[e.Name] {
			if v == nil {
				out = append(out, goValue{})
			} else {
				out = append(out, f.values(v, depth+1)...)
			}
			if len(out) >= maxFoldValues {
				break
			}
		}
		if len(out) > 0 {
			return out[:min(len(out), maxFoldValues)]
		}
	case *ast.CallExpr:
		return f.callValues(e, depth)
	}
	return unknown
}

// concat is the values of l + r, r computed only when needed.
func (f *goFile) concat(l []goValue, r func() []goValue) []goValue {
	var out, rs []goValue
	for _, a := range l {
		if !a.exact {
			out = append(out, a)
			continue
		}
		if rs == nil {
			rs = r()
		}
		for _, b := range rs {
			out = append(out, goValue{a.s + b.s, b.exact})
		}
		if len(out) >= maxFoldValues {
			break
		}
	}
	return out[:min(len(out), maxFoldValues)]
}

// callValues folds the calls that build strings from their arguments:
// a conversion string(x), filepath.Join and path.Join (the first
// argument's values, joined with the rest when all are known), and
// fmt.Sprintf (its format's text up to the first verb).
func (f *goFile) callValues(call *ast.CallExpr, depth int) []goValue {
	unknown := []goValue{{}}
	if id, ok := call.Fun.(*ast.Ident); ok && id.Name == "string" && len(call.Args) == 1 {
		return f.values(call.Args[0], depth+1)
	}
	if len(call.Args) == 0 {
		return unknown
	}
	switch f.qualified(call.Fun) {
	case "path/filepath.Join", "path.Join", "path/filepath.Clean", "path.Clean":
		return f.joinValues(call.Args, depth)
	case "fmt.Sprintf":
		out := f.values(call.Args[0], depth+1)
		for i, v := range out {
			if k := strings.IndexByte(v.s, '%'); k >= 0 {
				out[i] = goValue{v.s[:k], false}
			} else if len(call.Args) > 1 {
				out[i].exact = false
			}
		}
		return out
	}
	return unknown
}

// joinValues is the values of filepath.Join(args...): the known parts
// joined, cleaned when all are known, and otherwise up to the first
// part not wholly known.
func (f *goFile) joinValues(args []ast.Expr, depth int) []goValue {
	type partial struct {
		parts []string
		exact bool
	}
	acc := []partial{{exact: true}}
	for _, a := range args {
		var next []partial
		for _, p := range acc {
			if !p.exact {
				next = append(next, p)
				continue
			}
			for _, v := range f.values(a, depth+1) {
				next = append(next, partial{append(p.parts[:len(p.parts):len(p.parts)], v.s), v.exact})
			}
		}
		acc = next[:min(len(next), maxFoldValues)]
	}
	out := make([]goValue, len(acc))
	for i, p := range acc {
		if p.exact {
			out[i] = goValue{path.Join(p.parts...), true}
			continue
		}
		var kept []string
		for _, s := range p.parts {
			if s != "" {
				kept = append(kept, s)
			}
		}
		out[i] = goValue{strings.Join(kept, "/"), false}
	}
	return out
}
