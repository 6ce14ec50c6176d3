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
// the program meant. Every other control sequence stays escaped. An SGR
// sequence passes without the attribute that hides text (8, conceal), so
// that what a program prints is always shown (see visibleSGR). The second
// result says whether an SGR sequence passed: the printer then writes
// Reset after the output.
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
			if v := visibleSGR(s[:n]); v != "" {
				b.WriteString(v)
				sgr = true
			}
			s = s[n:]
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

// visibleSGR returns the SGR sequence seq without its conceal parameters
// (8), or "" when nothing else is left: an emptied sequence (ESC [ m)
// would reset every attribute, which the program did not ask for. The
// colour parameters 38, 48 and 58 take the 1 or 3 values that follow
// them in their semicolon form (38;5;8 is grey, not conceal), and their
// colon form is one parameter. Other ways to hide text (a foreground
// colour equal or close to the background) are not caught: a colour
// only close to another hides as well, and that cannot be decided
// without knowing the terminal's palette.
func visibleSGR(seq string) string {
	body := seq[2 : len(seq)-1]
	if !strings.Contains(body, "8") {
		return seq
	}
	params := strings.Split(body, ";")
	kept := make([]string, 0, len(params))
	for i := 0; i < len(params); i++ {
		p := params[i]
		main, _, sub := strings.Cut(p, ":")
		switch v := sgrValue(main); {
		case v == 8:
			continue
		case (v == 38 || v == 48 || v == 58) && !sub && i+1 < len(params):
			// Extended colour, semicolon form: 5;N or 2;R;G;B follow.
			n := 0
			switch sgrValue(params[i+1]) {
			case 5:
				n = 2
			case 2:
				n = 4
			}
			n = min(n, len(params)-1-i)
			kept = append(kept, params[i:i+1+n]...)
			i += n
			continue
		}
		kept = append(kept, p)
	}
	if len(kept) == 0 {
		return ""
	}
	if len(kept) == len(params) {
		return seq
	}
	return "\x1b[" + strings.Join(kept, ";") + "m"
}

// sgrValue is the number an SGR parameter stands for, as terminals read
// it: leading zeros allowed, an empty one 0; -1 for one too long.
func sgrValue(p string) int {
	p = strings.TrimLeft(p, "0")
	if len(p) > 4 {
		return -1
	}
	if p == "" {
		return 0
	}
	v := 0
	for i := 0; i < len(p); i++ {
		v = v*10 + int(p[i]-'0')
	}
	return v
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
