package safety

import (
	"strings"
	"unsafe"

	"github.com/codeagent/codeagent/safety/internal/tsparse"
)

// kind is the analysers' own enumeration of the node kinds they look at; all
// other kinds map to kOther. Each language uses its own subset.
type kind uint8

// grammar maps a tree-sitter grammar's symbol ids to kinds and holds the
// field ids the analysers use.
type grammar struct {
	lang   *tsparse.Language
	kinds  []kind
	fields map[string]uint16
}

// newGrammar builds the tables. names maps a kind name to a kind; a name
// starting with "'" is an anonymous kind (a keyword or operator).
func newGrammar(ptr unsafe.Pointer, names map[string]kind, fields []string) *grammar {
	lang := tsparse.NewLanguage(ptr)
	g := &grammar{lang: lang, kinds: make([]kind, lang.KindCount()), fields: map[string]uint16{}}
	for id := range g.kinds {
		name, named := lang.KindName(uint16(id))
		if !named {
			name = "'" + name
		}
		g.kinds[id] = names[name]
	}
	for _, f := range fields {
		id := lang.FieldID(f)
		if id == 0 {
			panic("safety: grammar has no field " + f)
		}
		g.fields[f] = id
	}
	return g
}

func (g *grammar) field(name string) uint16 {
	id, ok := g.fields[name]
	if !ok {
		panic("safety: field not registered: " + name)
	}
	return id
}

// tree is a parsed input: the flat node array and the source.
type tree struct {
	src []byte
	// str is src as a string without a copy, so that text allocates
	// nothing. Its substrings are only valid during the check: everything
	// that goes into a Finding is copied (see collector.add and snippet).
	str   string
	nodes []tsparse.Node
	g     *grammar
}

func newTree(src []byte, nodes []tsparse.Node, g *grammar) *tree {
	return &tree{src: src, str: unsafe.String(unsafe.SliceData(src), len(src)), nodes: nodes, g: g}
}

// kOther is every kind an analyser does not name; kError is an ERROR node.
const (
	kOther kind = iota
	kError
	firstLanguageKind
)

func (t *tree) kind(i int32) kind {
	if i < 0 {
		return kOther
	}
	k := t.nodes[i].Kind
	if k == tsparse.ErrorKind {
		return kError
	}
	if int(k) < len(t.g.kinds) {
		return t.g.kinds[k]
	}
	return kOther
}

func (t *tree) node(i int32) *tsparse.Node { return &t.nodes[i] }

// text returns the source of node i.
func (t *tree) text(i int32) string {
	if i < 0 {
		return ""
	}
	n := &t.nodes[i]
	if int(n.End) > len(t.str) || n.Start > n.End {
		return ""
	}
	return t.str[n.Start:n.End]
}

func (t *tree) span(i int32) (int, int) {
	n := &t.nodes[i]
	return int(n.Start), int(n.End)
}

func (t *tree) parent(i int32) int32 {
	if i < 0 {
		return -1
	}
	return t.nodes[i].Parent
}

// child returns the first child of i in field f, or -1.
func (t *tree) child(i int32, f uint16) int32 {
	if i < 0 {
		return -1
	}
	for c := t.nodes[i].FirstChild; c >= 0; c = t.nodes[c].NextSibling {
		if t.nodes[c].Field == f {
			return c
		}
	}
	return -1
}

// firstNamed returns the first named child of i, or -1.
func (t *tree) firstNamed(i int32) int32 {
	if i < 0 {
		return -1
	}
	for c := t.nodes[i].FirstChild; c >= 0; c = t.nodes[c].NextSibling {
		if t.named(c) {
			return c
		}
	}
	return -1
}

// nextNamed returns the next named sibling of i, or -1.
func (t *tree) nextNamed(i int32) int32 {
	for c := t.nodes[i].NextSibling; c >= 0; c = t.nodes[c].NextSibling {
		if t.named(c) {
			return c
		}
	}
	return -1
}

func (t *tree) named(i int32) bool {
	return t.nodes[i].Flags&tsparse.Named != 0 && t.nodes[i].Flags&tsparse.Extra == 0
}

// fieldOf returns the field id of i under its parent.
func (t *tree) fieldOf(i int32) uint16 { return t.nodes[i].Field }

// end returns the index just past i's subtree (nodes are in pre-order).
func (t *tree) end(i int32) int32 {
	for j := i; j >= 0; j = t.nodes[j].Parent {
		if s := t.nodes[j].NextSibling; s >= 0 {
			return s
		}
	}
	return int32(len(t.nodes))
}

// reportSyntaxErrors adds a finding for the first few ERROR and MISSING
// nodes. An ERROR node inside another is skipped.
func (t *tree) reportSyntaxErrors(out *collector, hint string) {
	const maxErrors = 3
	count := 0
	for i := int32(0); i < int32(len(t.nodes)) && count < maxErrors; i++ {
		n := &t.nodes[i]
		switch {
		case n.Kind == tsparse.ErrorKind:
			s, e := t.span(i)
			txt := strings.TrimSpace(snippet(t.src, s, e))
			msg := "invalid syntax"
			if txt != "" {
				msg = "invalid syntax near `" + txt + "`"
			}
			out.add(RuleSyntaxError, s, e, msg, hint)
			count++
			i = t.end(i) - 1
		case n.Flags&tsparse.Missing != 0:
			name, _ := t.g.lang.KindName(n.Kind)
			s, _ := t.span(i)
			out.add(RuleSyntaxError, s, s, "missing `"+name+"`", hint)
			count++
		}
	}
}
