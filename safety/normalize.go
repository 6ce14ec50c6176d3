package safety

import (
	"strings"

	"golang.org/x/text/unicode/norm"
)

// normIdent returns an identifier as Python sees it: Python applies NFKC to
// identifiers while parsing, so "ｅｘｅｃ" (full-width) and "𝐞𝐯𝐚𝐥" name the
// builtins exec and eval. ASCII names are returned as they are.
func normIdent(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return norm.NFKC.String(s)
		}
	}
	return s
}

// isDunder reports whether s looks like __name__.
func isDunder(s string) bool {
	return len(s) > 4 && strings.HasPrefix(s, "__") && strings.HasSuffix(s, "__")
}

// isPrivate reports whether s is a private name (_x or __x) and not a dunder.
func isPrivate(s string) bool { return strings.HasPrefix(s, "_") && !isDunder(s) }

// set is a string set built from a policy list.
type set map[string]bool

func newSet(list ...[]string) set {
	s := set{}
	for _, l := range list {
		for _, x := range l {
			s[x] = true
		}
	}
	return s
}

// nameFilter is a quick, exact pre-check for set lookups on the hot paths
// (every identifier of a file): it records the lengths and first bytes of a
// set's names, so most names are ruled out without hashing them. mayHave
// has no false negatives.
type nameFilter struct {
	lens  uint64    // bit min(len, 63)
	first [4]uint64 // bit per first byte
}

func newNameFilter(s set) nameFilter {
	var f nameFilter
	for name := range s {
		f.add(name)
	}
	return f
}

func (f *nameFilter) add(name string) {
	f.lens |= 1 << min(len(name), 63)
	if name != "" {
		f.first[name[0]>>6] |= 1 << (name[0] & 63)
	}
}

func (f *nameFilter) mayHave(name string) bool {
	if f.lens&(1<<min(len(name), 63)) == 0 {
		return false
	}
	return name == "" || f.first[name[0]>>6]&(1<<(name[0]&63)) != 0
}

// matchModule reports whether module path m is one of list or inside one of
// its packages, and returns the entry that matched.
func matchModule(m string, list []string) (string, bool) {
	for _, e := range list {
		if m == e || (len(m) > len(e) && m[len(e)] == '.' && strings.HasPrefix(m, e)) {
			return e, true
		}
	}
	return "", false
}

// rootOf returns the first component of a dotted name.
func rootOf(m string) string {
	if i := strings.IndexByte(m, '.'); i >= 0 {
		return m[:i]
	}
	return m
}

// lastOf returns the last component of a dotted name.
func lastOf(m string) string {
	if i := strings.LastIndexByte(m, '.'); i >= 0 {
		return m[i+1:]
	}
	return m
}
