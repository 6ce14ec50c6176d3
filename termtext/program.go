package termtext

import (
	"strings"
)

// Reset ends every SGR attribute: what a printer writes after a program's
// output that passed colours, so that the program's last colour (or
// concealed text) never reaches codeagent's own lines.
const Reset = "\x1b[0m"

// maxSGR bounds the parameters of one SGR sequence that passes.
const maxSGR = 32

// Program escapes a program's output for a terminal as Text does, except
// that colour and style sequences (SGR: ESC [ digits ; : m) and carriage
// returns pass through, so that coloured output and progress bars look as
// the program meant. Every other control sequence stays escaped. The
// second result says whether an SGR sequence passed: the printer then
// writes Reset after the output.
func Program(s string) (string, bool) {
	if clean(s, true) {
		return s, false
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	sgr := false
	for len(s) > 0 {
		i := strings.IndexAny(s, "\x1b\r")
		if i < 0 {
			appendEscaped(&b, s, true)
			break
		}
		appendEscaped(&b, s[:i], true)
		s = s[i:]
		if s[0] == '\r' {
			b.WriteByte('\r')
			s = s[1:]
			continue
		}
		if n := sgrLen(s); n > 0 {
			b.WriteString(s[:n])
			s, sgr = s[n:], true
			continue
		}
		appendEscaped(&b, s[:1], true)
		s = s[1:]
	}
	return b.String(), sgr
}

// sgrLen is the length of the SGR sequence s starts with, or 0.
func sgrLen(s string) int {
	if len(s) < 3 || s[0] != 0x1b || s[1] != '[' {
		return 0
	}
	for i := 2; i < len(s) && i < 2+maxSGR+1; i++ {
		switch c := s[i]; {
		case c == 'm':
			return i + 1
		case c >= '0' && c <= '9' || c == ';' || c == ':':
		default:
			return 0
		}
	}
	return 0
}

// sgrPrefix reports whether s (an ESC and what follows it) may still
// become an SGR sequence: a Writer holds it back until more comes.
func sgrPrefix(s string) bool {
	if len(s) > 2+maxSGR || s[0] != 0x1b {
		return false
	}
	if len(s) == 1 {
		return true
	}
	if s[1] != '[' {
		return false
	}
	for i := 2; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c == ';' || c == ':') {
			return false
		}
	}
	return true
}
