package main

import (
	"errors"
	"io"
	"os"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/codeagent/codeagent/termtext"
)

// A small line editor for `codeagent repl`, in Go (no cgo readline):
// the terminal is put in a raw-ish mode (no echo, no line buffering, no
// signals from Ctrl-C, output processing kept), and keys are read from a
// channel that one goroutine fills from stdin, so that Ctrl-C can also be
// seen while a cell runs. Keys: printable text, Backspace, Delete, Left,
// Right, Home/End (and Ctrl-A/Ctrl-E, Ctrl-B/Ctrl-F), Ctrl-K and Ctrl-U
// (kill to the end or the start), Ctrl-W (the word before), Up/Down
// (history), Tab (four spaces), Ctrl-L (clear the screen), Enter, Ctrl-C
// (abandon the input), Ctrl-D (end, on an empty line).

// errAbandon is returned by readLine for Ctrl-C.
var errAbandon = errors.New("input abandoned")

// rawTerminal switches fd to the editor's mode and returns a function
// restoring the previous one.
func rawTerminal(fd int) (func(), error) {
	old, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return nil, err
	}
	t := *old
	t.Lflag &^= unix.ICANON | unix.ECHO | unix.ISIG | unix.IEXTEN
	t.Iflag &^= unix.ICRNL | unix.IXON | unix.INLCR | unix.IGNCR
	t.Cc[unix.VMIN], t.Cc[unix.VTIME] = 1, 0
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, &t); err != nil {
		return nil, err
	}
	return func() { _ = unix.IoctlSetTermios(fd, unix.TCSETS, old) }, nil
}

// isTTY reports whether f is a terminal.
func isTTY(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// byteSource is the terminal's bytes, one consumer at a time: the editor,
// or the repl while a cell runs, which keeps what is typed meanwhile in
// pending for the editor.
type byteSource struct {
	ch      <-chan byte
	pending []byte
}

func (b *byteSource) next() (byte, bool) {
	if len(b.pending) > 0 {
		c := b.pending[0]
		b.pending = b.pending[1:]
		return c, true
	}
	c, ok := <-b.ch
	return c, ok
}

// keyReader turns bytes from a terminal into keys.
type keyReader struct {
	src *byteSource
}

// key is one key press: a rune, or a named key.
type key struct {
	r    rune
	name string // "up", "down", "left", "right", "home", "end", "delete", "eof"
}

func (k *keyReader) next() key {
	b, ok := k.src.next()
	if !ok {
		return key{name: "eof"}
	}
	if b == 0x1b {
		return k.escape()
	}
	if b < utf8.RuneSelf {
		return key{r: rune(b)}
	}
	buf := []byte{b}
	for !utf8.FullRune(buf) && len(buf) < utf8.UTFMax {
		c, ok := k.src.next()
		if !ok {
			break
		}
		buf = append(buf, c)
	}
	r, _ := utf8.DecodeRune(buf)
	return key{r: r}
}

// escape reads the rest of an escape sequence: CSI (ESC [) or SS3 (ESC O).
func (k *keyReader) escape() key {
	b, ok := k.src.next()
	if !ok {
		return key{name: "eof"}
	}
	if b != '[' && b != 'O' {
		return key{}
	}
	var params []byte
	for {
		c, ok := k.src.next()
		if !ok {
			return key{name: "eof"}
		}
		if c >= 0x40 && c <= 0x7e { // the final byte
			switch {
			case c == 'A':
				return key{name: "up"}
			case c == 'B':
				return key{name: "down"}
			case c == 'C':
				return key{name: "right"}
			case c == 'D':
				return key{name: "left"}
			case c == 'H':
				return key{name: "home"}
			case c == 'F':
				return key{name: "end"}
			case c == '~':
				switch string(params) {
				case "1", "7":
					return key{name: "home"}
				case "4", "8":
					return key{name: "end"}
				case "3":
					return key{name: "delete"}
				}
			}
			return key{}
		}
		if len(params) < 16 {
			params = append(params, c)
		}
	}
}

// editor reads lines with editing and history.
type editor struct {
	keys    keyReader
	out     io.Writer
	history []string
}

const maxHistory = 1000

// readLine shows prompt and returns the line typed, without its newline;
// io.EOF on Ctrl-D at an empty line or the end of input, errAbandon on
// Ctrl-C.
func (e *editor) readLine(prompt string) (string, error) {
	var line []rune
	pos := 0
	hist := len(e.history)
	saved := ""
	redraw := func() {
		var b strings.Builder
		b.WriteString("\r" + prompt + termtext.Name(string(line)) + "\x1b[K")
		if back := len(line) - pos; back > 0 {
			b.WriteString("\x1b[" + itoa(back) + "D")
		}
		io.WriteString(e.out, b.String())
	}
	redraw()
	for {
		k := e.keys.next()
		switch {
		case k.name == "eof":
			io.WriteString(e.out, "\r\n")
			return "", io.EOF
		case k.r == '\r' || k.r == '\n':
			io.WriteString(e.out, "\r\n")
			s := string(line)
			e.remember(s)
			return s, nil
		case k.r == 3: // Ctrl-C
			io.WriteString(e.out, "^C\r\n")
			return "", errAbandon
		case k.r == 4: // Ctrl-D
			if len(line) == 0 {
				io.WriteString(e.out, "\r\n")
				return "", io.EOF
			}
			if pos < len(line) {
				line = append(line[:pos], line[pos+1:]...)
			}
		case k.r == 0x7f || k.r == 8:
			if pos > 0 {
				line = append(line[:pos-1], line[pos:]...)
				pos--
			}
		case k.name == "delete":
			if pos < len(line) {
				line = append(line[:pos], line[pos+1:]...)
			}
		case k.name == "left" || k.r == 2:
			pos = max(pos-1, 0)
		case k.name == "right" || k.r == 6:
			pos = min(pos+1, len(line))
		case k.name == "home" || k.r == 1:
			pos = 0
		case k.name == "end" || k.r == 5:
			pos = len(line)
		case k.r == 11: // Ctrl-K
			line = line[:pos]
		case k.r == 21: // Ctrl-U
			line, pos = append([]rune(nil), line[pos:]...), 0
		case k.r == 23: // Ctrl-W
			line, pos = deleteWord(line, pos)
		case k.r == 12: // Ctrl-L
			io.WriteString(e.out, "\x1b[H\x1b[2J")
		case k.name == "up" || k.name == "down":
			if k.name == "up" && hist > 0 {
				if hist == len(e.history) {
					saved = string(line)
				}
				hist--
			} else if k.name == "down" && hist < len(e.history) {
				hist++
			} else {
				continue
			}
			s := saved
			if hist < len(e.history) {
				s = e.history[hist]
			}
			line = []rune(s)
			pos = len(line)
		case k.r == '\t':
			line = append(line[:pos], append([]rune("    "), line[pos:]...)...)
			pos += 4
		case k.r >= 0x20 && k.r != 0x7f && k.name == "":
			line = append(line[:pos], append([]rune{k.r}, line[pos:]...)...)
			pos++
		default:
			continue
		}
		redraw()
	}
}

// remember adds a line to the history: not a blank one, nor the last
// line again; the oldest goes past maxHistory.
func (e *editor) remember(s string) {
	if strings.TrimSpace(s) == "" || len(e.history) > 0 && e.history[len(e.history)-1] == s {
		return
	}
	e.history = append(e.history, s)
	if len(e.history) > maxHistory {
		e.history = e.history[1:]
	}
}

// deleteWord removes the word before pos (and the spaces after it), as
// Ctrl-W does in a shell, and returns the line and the new position.
func deleteWord(line []rune, pos int) ([]rune, int) {
	start := pos
	for start > 0 && unicode.IsSpace(line[start-1]) {
		start--
	}
	for start > 0 && !unicode.IsSpace(line[start-1]) {
		start--
	}
	return append(line[:start], line[pos:]...), start
}

func itoa(n int) string {
	var b [20]byte
	i := len(b)
	for n >= 10 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	i--
	b[i] = byte('0' + n)
	return string(b[i:])
}

// cellComplete reports whether the lines typed so far make a cell, as
// Python's interactive prompt decides: not while a bracket, a triple-quoted
// string or a backslash continuation is open; a line opening a block
// (ending in ':' or a decorator) and any cell of several lines end with a
// blank line; other single lines are complete at once.
func cellComplete(lines []string) bool {
	text := strings.Join(lines, "\n")
	depth, inString := 0, ""
	for i := 0; i < len(text); i++ {
		c := text[i]
		if inString != "" {
			switch {
			case c == '\\':
				i++
			case strings.HasPrefix(text[i:], inString):
				i += len(inString) - 1
				inString = ""
			case c == '\n' && len(inString) == 1:
				inString = "" // an unterminated short string: Python says so
			}
			continue
		}
		switch c {
		case '#':
			for i < len(text) && text[i] != '\n' {
				i++
			}
		case '"', '\'':
			q := string(c)
			if strings.HasPrefix(text[i:], strings.Repeat(q, 3)) {
				q = strings.Repeat(q, 3)
				i += 2
			}
			inString = q
		case '(', '[', '{':
			depth++
		case ')', ']', '}':
			depth = max(depth-1, 0)
		}
	}
	if depth > 0 || len(inString) == 3 || strings.HasSuffix(text, "\\") {
		return false
	}
	last := lines[len(lines)-1]
	if len(lines) > 1 {
		return strings.TrimSpace(last) == ""
	}
	first := strings.TrimSpace(stripComment(lines[0]))
	return !strings.HasSuffix(first, ":") && !strings.HasPrefix(first, "@")
}

// stripComment drops a trailing # comment outside strings, roughly.
func stripComment(line string) string {
	inString := byte(0)
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case inString != 0:
			if c == '\\' {
				i++
			} else if c == inString {
				inString = 0
			}
		case c == '"' || c == '\'':
			inString = c
		case c == '#':
			return line[:i]
		}
	}
	return line
}
