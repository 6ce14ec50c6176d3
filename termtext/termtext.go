// Package termtext makes untrusted text safe to print on a terminal.
//
// Program output, file names a program chose, model replies and code can
// hold escape sequences (OSC 52 clipboard writes, cursor moves, a line that
// overwrites codeagent's own verdict) and newlines that forge lines of
// codeagent's output. Every printer of the CLI passes such text through
// here: control characters are shown visibly (ESC as \x1b, CR as \r, C1
// controls as \u009b), Unicode bidirectional overrides as \u202e, and bytes
// that are not valid UTF-8 as \xNN. Text keeps its newlines and tabs; a name
// (one line of a listing) does not. JSON output never goes through here.
package termtext

import (
	"fmt"
	"strings"
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
			if r == utf8.RuneError && n <= 1 || unsafeRune(r) {
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
		case unsafeRune(r):
			fmt.Fprintf(b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
}

// unsafeRune reports the non-ASCII runes a terminal acts on or that
// reorder what is shown: C1 controls (U+0080-U+009F, CSI among them) and
// the bidirectional embeddings, overrides and isolates.
func unsafeRune(r rune) bool {
	return r >= 0x80 && r <= 0x9f || r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069
}
