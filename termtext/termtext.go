// Package termtext makes untrusted text safe to print on a terminal.
//
// Program output, file names a program chose, model replies and code can
// hold escape sequences (OSC 52 clipboard writes, cursor moves, a line that
// overwrites codeagent's own verdict) and newlines that forge lines of
// codeagent's output. Every printer of the CLI passes such text through
// here: control characters are shown visibly (ESC as \x1b, CR as \r, C1
// controls as \u009b), Unicode bidirectional overrides and marks as \u202e, and
// bytes that are not valid UTF-8 as \xNN. Text keeps its newlines and tabs; a
// name (one line of a listing) does not, nor invisible characters (Unicode
// format characters such as U+200B, shown as \u200b). JSON output never goes through here.
package termtext

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Text escapes s for a terminal, keeping newlines and tabs.
func Text(s string) string { return escape(s, true) }

// Name escapes s as one line: newlines and tabs are escaped too, so that a
// file name, a task or a message cannot start a line of its own.
func Name(s string) string { return escape(s, false) }

// Bytes is Text for a byte slice.
func Bytes(b []byte) string { return Text(string(b)) }

func escape(s string, keepLines bool) string {
	if clean(s, keepLines) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	appendEscaped(&b, s, keepLines)
	return b.String()
}

// clean reports whether s needs no escaping, the common case.
func clean(s string, keepLines bool) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf || c < 0x20 || c == 0x7f {
			if keepLines && (c == '\n' || c == '\t') {
				continue
			}
			if c < utf8.RuneSelf {
				return false
			}
			r, n := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && n <= 1 || unsafeRune(r) || !keepLines && invisibleRune(r) {
				return false
			}
			i += n - 1
		}
	}
	return true
}

func appendEscaped(b *strings.Builder, s string, keepLines bool) {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			fmt.Fprintf(b, `\x%02x`, s[i])
		case keepLines && (r == '\n' || r == '\t'):
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(b, `\x%02x`, r)
		case unsafeRune(r) || !keepLines && invisibleRune(r):
			fmt.Fprintf(b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
}

// unsafeRune reports the non-ASCII runes a terminal acts on or that
// reorder what is shown: C1 controls (U+0080-U+009F, CSI among them), the
// bidirectional embeddings, overrides and isolates, and the bidirectional
// marks (U+061C, U+200E, U+200F).
func unsafeRune(r rune) bool {
	return r >= 0x80 && r <= 0x9f || r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069 ||
		r == 0x61c || r == 0x200e || r == 0x200f
}

// invisibleRune reports the runes a name must not hold unseen: every
// Unicode format character (zero-width space and joiners, the byte order
// mark, soft hyphen, tag characters) and the line and paragraph
// separators. Text keeps them (an emoji's joiner), a name shows them
// escaped, so that report\u200b.csv is not taken for report.csv.
func invisibleRune(r rune) bool {
	return unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp)
}
