package safety

// The Python lint checks beside names: redefinitions, f-strings without
// fields, is with a literal.

import (
	"fmt"
	"slices"
	"strings"
)

// redefinitions reports a function or class defined again in the same
// block with no use of its name in between. Decorated definitions (an
// overload, a property's setter) are left alone.
func (l *pyLint) redefinitions() {
	t := l.t
	for b := int32(0); b < int32(len(t.nodes)); b++ {
		if k := t.kind(b); k != pyModule && k != pyBlock {
			continue
		}
		var last map[string]int32
		for c := t.node(b).FirstChild; c >= 0; c = t.node(c).NextSibling {
			k := t.kind(c)
			if k != pyFunctionDef && k != pyClassDef {
				continue
			}
			name := normIdent(t.text(t.child(c, l.f.name)))
			if prev, ok := last[name]; ok && !l.usedBetween(name, t.end(prev), c) {
				line, _ := l.out.position(int(t.node(prev).Start))
				l.lintAdd(RuleRedefinedUnused, t.child(c, l.f.name),
					fmt.Sprintf("redefinition of unused '%s' from line %d", name, line),
					"remove the first definition, or give one of them another name")
			}
			if last == nil {
				last = map[string]int32{}
			}
			last[name] = c
		}
	}
}

// usedBetween reports whether an identifier spelled name occurs in the
// nodes [from, to). The first call indexes the identifiers by name, so
// that many redefinitions cost no more than one pass.
func (l *pyLint) usedBetween(name string, from, to int32) bool {
	t := l.t
	if l.idents == nil {
		l.idents = map[string][]int32{}
		for j := int32(0); j < int32(len(t.nodes)); j++ {
			if t.kind(j) == pyIdentifier {
				n := normIdent(t.text(j))
				l.idents[n] = append(l.idents[n], j)
			}
		}
	}
	at := l.idents[name]
	k, _ := slices.BinarySearch(at, from)
	return k < len(at) && at[k] < to
}

// fstring reports an f-string without fields.
func (l *pyLint) fstring(i int32) {
	t := l.t
	start := t.firstNamed(i)
	if t.kind(start) != pyStringStart || !strings.ContainsAny(t.text(start), "fF") {
		return
	}
	parts := []int32{i}
	if p := t.parent(i); t.kind(p) == pyConcatString {
		if t.firstNamed(p) != i {
			return // reported at the first part
		}
		parts = parts[:0]
		for c := t.firstNamed(p); c >= 0; c = t.nextNamed(c) {
			parts = append(parts, c)
		}
	}
	for _, s := range parts {
		for c := t.firstNamed(s); c >= 0; c = t.nextNamed(c) {
			if t.kind(c) == pyInterpolation {
				return
			}
		}
	}
	l.lintAdd(RuleFStringNoField, i, "f-string is missing placeholders",
		"remove the f prefix, or put the values in {} fields")
}

// isLiteral reports `x is "a"` and `x is not 1`, which compare identity.
func (l *pyLint) isLiteral(i int32) {
	t := l.t
	var prev int32 = -1
	for c := t.node(i).FirstChild; c >= 0; c = t.node(c).NextSibling {
		if k := t.kind(c); k == pyIsOp || k == pyIsNotOp {
			next := t.nextNamed(c)
			if pyLiteral(t.kind(prev)) || pyLiteral(t.kind(next)) {
				l.lintAdd(RuleIsLiteral, i, "'is' compares identity, not value, with a literal",
					"use == or != to compare with a str or number")
				return
			}
		}
		if t.named(c) {
			prev = c
		}
	}
}

func pyLiteral(k kind) bool {
	return k == pyString || k == pyConcatString || k == pyInteger || k == pyFloat
}
