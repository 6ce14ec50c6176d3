package safety

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// stringPrefix returns a string node's prefix, in lower case.
func (f *pyFile) stringPrefix(i int32) (prefix string) {
	t := f.t
	for c := t.node(i).FirstChild; c >= 0; c = t.node(c).NextSibling {
		if t.kind(c) == pyStringStart {
			prefix = strings.ToLower(strings.TrimRight(t.text(c), `"'`))
		}
	}
	return prefix
}

// stringValue returns the value of a string or implicitly concatenated
// strings, up to the first f-string field; exact is false when a field cut
// it short.
func (f *pyFile) stringValue(i int32) (string, bool) {
	t := f.t
	if t.kind(i) == pyConcatString {
		var b strings.Builder
		for c := t.firstNamed(i); c >= 0; c = t.nextNamed(c) {
			s, exact := f.stringValue(c)
			b.WriteString(s)
			if !exact {
				return b.String(), false
			}
		}
		return b.String(), true
	}
	if t.kind(i) != pyString {
		return "", false
	}
	raw := strings.ContainsRune(f.stringPrefix(i), 'r')
	var b strings.Builder
	for c := t.node(i).FirstChild; c >= 0; c = t.node(c).NextSibling {
		switch t.kind(c) {
		case pyStringContent:
			b.WriteString(decodePyEscapes(t.text(c), raw))
		case pyInterpolation:
			return b.String(), false
		}
	}
	return b.String(), true
}

// literalString returns the value of a plain string literal (no f-string
// fields), or false when the expression is anything else.
func (f *pyFile) literalString(i int32) (string, bool) {
	if i < 0 {
		return "", false
	}
	k := f.t.kind(i)
	if k != pyString && k != pyConcatString {
		return "", false
	}
	return f.stringValue(i)
}

// spelled returns the first introspection name that v spells as something
// code could use: the whole string, or a part of an attribute path, call,
// subscript or format field. A name that is a word of a sentence ("never
// use __import__ here") is not: it is only text.
func (f *pyFile) spelled(v string) (string, bool) {
	if !strings.Contains(v, "__") {
		return "", false
	}
	for _, name := range f.introspection {
		for from := 0; ; {
			k := strings.Index(v[from:], name)
			if k < 0 {
				break
			}
			k += from
			if !inProse(v, k, k+len(name)) {
				return name, true
			}
			from = k + len(name)
		}
	}
	return "", false
}

// inProse reports whether v[i:j] stands as a word of text: the string is
// more than the word, and the word is set off by what only text puts
// around a word. Before it: the start, a space or a backquote. After it:
// the end, a space, a backquote, a comma or a semicolon, or . : ! ? )
// that end the string or come before a space.
func inProse(v string, i, j int) bool {
	if strings.TrimSpace(v) == v[i:j] {
		return false
	}
	space := func(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
	if i > 0 && !space(v[i-1]) && v[i-1] != '`' {
		return false
	}
	if j == len(v) {
		return true
	}
	switch c := v[j]; {
	case space(c) || c == '`' || c == ',' || c == ';':
		return true
	case strings.IndexByte(".:!?)", c) >= 0:
		return j+1 == len(v) || space(v[j+1])
	}
	return false
}

// checkString reports string literals that spell introspection names: they
// only matter as input to getattr, attrgetter or str.format, which the
// checker cannot always follow.
func (f *pyFile) checkString(i int32) {
	t := f.t
	raw := strings.ContainsRune(f.stringPrefix(i), 'r')
	// The literal pieces: the text between quotes, without f-string fields.
	for c := t.node(i).FirstChild; c >= 0; c = t.node(c).NextSibling {
		if t.kind(c) != pyStringContent {
			continue
		}
		if name, ok := f.spelled(decodePyEscapes(t.text(c), raw)); ok {
			f.add(RuleIntrospection, i, fmt.Sprintf("the string spells %s, an introspection name", name), dunderHint(name))
			return
		}
	}
}

// checkConcat checks implicitly concatenated strings as one value, so
// "__sub" "classes__" is seen whole.
func (f *pyFile) checkConcat(i int32) {
	v, _ := f.stringValue(i)
	if name, ok := f.spelled(v); ok {
		f.add(RuleIntrospection, i, fmt.Sprintf("the strings spell %s, an introspection name", name), dunderHint(name))
	}
}

// checkFormatCall checks str.format, format_map and Formatter.vformat calls
// whose template can walk attributes: "{0.__class__}".format(x).
func (f *pyFile) checkFormatCall(fn int32, q string, args int32) {
	t := f.t
	var tmpl int32 = -1
	switch {
	case q == "str.format" || q == "str.format_map" || lastOf(q) == "vformat" || strings.HasSuffix(q, "Formatter.format"):
		tmpl, _ = f.positional(args, 0)
	case t.kind(fn) == pyAttribute:
		tmpl = t.child(fn, f.f.object)
	}
	if tmpl < 0 {
		return
	}
	if s, ok := f.literalString(tmpl); ok {
		if field, bad := badFormatField(s); bad {
			f.add(RuleFormatTraversal, tmpl, fmt.Sprintf("the format field {%s} walks attributes", field),
				"format values you computed, e.g. \"{}\".format(obj.name), not attributes inside the template")
		}
		return
	}
	// A template computed in place: report literal pieces that stop in the
	// middle of a field name, e.g. ("{0." + "_"*2 + "class__}").format(x).
	if f.computedTemplateOpensField(tmpl, 0) {
		f.add(RuleFormatTraversal, tmpl, "the format template is assembled so that a field name is computed",
			"write the template as one literal string, e.g. \"{} {}\".format(a, b)")
	}
}

func (f *pyFile) computedTemplateOpensField(i int32, depth int) bool {
	t := f.t
	if depth > 64 || i < 0 {
		return false
	}
	switch t.kind(i) {
	case pyString, pyConcatString:
		s, _ := f.stringValue(i)
		return opensFieldName(s)
	case pyParenExpr:
		return f.computedTemplateOpensField(t.firstNamed(i), depth+1)
	case pyBinaryOp:
		return f.computedTemplateOpensField(t.child(i, f.f.left), depth+1) ||
			f.computedTemplateOpensField(t.child(i, f.f.right), depth+1)
	}
	return false
}

// badFormatField returns the first replacement field of a str.format
// template that walks to a private or dunder attribute or index.
func badFormatField(s string) (string, bool) {
	for i := 0; i < len(s); i++ {
		if s[i] != '{' {
			continue
		}
		if i+1 < len(s) && s[i+1] == '{' {
			i++
			continue
		}
		j := i + 1
		for j < len(s) && !strings.ContainsRune("!:{}", rune(s[j])) {
			j++
		}
		name := s[i+1 : j]
		if fieldWalksPrivate(name) {
			return name, true
		}
	}
	return "", false
}

// fieldWalksPrivate reports whether a field name such as 0.__class__ or
// x[_y] reaches a name that starts with an underscore.
func fieldWalksPrivate(name string) bool {
	for k := 0; k < len(name); k++ {
		if (name[k] == '.' || name[k] == '[') && k+1 < len(name) {
			rest := strings.TrimSpace(name[k+1:])
			if strings.HasPrefix(rest, "_") {
				return true
			}
		}
	}
	return false
}

// opensFieldName reports whether s ends inside a replacement field's name.
func opensFieldName(s string) bool {
	open := false
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '{':
			if !open && i+1 < len(s) && s[i+1] == '{' {
				i++
				continue
			}
			open = true
		case '}', '!', ':':
			open = false
		}
	}
	return open
}

// decodePyEscapes decodes the backslash escapes of a Python string literal's
// body so that "\x5f\x5fclass\x5f\x5f" is seen as "__class__". Unknown
// escapes stay as they are, as in Python.
func decodePyEscapes(s string, raw bool) string {
	if raw || !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 >= len(s) {
			b.WriteByte(c)
			continue
		}
		i++
		switch e := s[i]; e {
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case 'r':
			b.WriteByte('\r')
		case '\\', '\'', '"':
			b.WriteByte(e)
		case '\n':
		case 'x', 'u', 'U':
			n := 2
			if e == 'u' {
				n = 4
			} else if e == 'U' {
				n = 8
			}
			if i+1+n <= len(s) {
				if v, err := strconv.ParseUint(s[i+1:i+1+n], 16, 32); err == nil && v <= utf8.MaxRune {
					b.WriteRune(rune(v))
					i += n
					continue
				}
			}
			b.WriteByte('\\')
			b.WriteByte(e)
		case 'N':
			if end := strings.IndexByte(s[i:], '}'); i+1 < len(s) && s[i+1] == '{' && end > 0 {
				b.WriteString(unicodeName(s[i+2 : i+end]))
				i += end
				continue
			}
			b.WriteString(`\N`)
		default:
			if e >= '0' && e <= '7' {
				j := i
				for j < len(s) && j < i+3 && s[j] >= '0' && s[j] <= '7' {
					j++
				}
				v, _ := strconv.ParseUint(s[i:j], 8, 32)
				b.WriteRune(rune(v))
				i = j - 1
				continue
			}
			b.WriteByte('\\')
			b.WriteByte(e)
		}
	}
	return b.String()
}

// unicodeName resolves the \N{...} names that spell identifier characters
// an attacker would need; others become U+FFFD.
func unicodeName(name string) string {
	switch strings.ToUpper(strings.TrimSpace(name)) {
	case "LOW LINE", "LOWLINE":
		return "_"
	case "FULL STOP", "PERIOD":
		return "."
	}
	if n := strings.ToUpper(name); strings.HasPrefix(n, "LATIN SMALL LETTER ") && len(n) == len("LATIN SMALL LETTER ")+1 {
		return strings.ToLower(n[len(n)-1:])
	}
	if n := strings.ToUpper(name); strings.HasPrefix(n, "LATIN CAPITAL LETTER ") && len(n) == len("LATIN CAPITAL LETTER ")+1 {
		return n[len(n)-1:]
	}
	return "\uFFFD"
}
