package termtext

import (
	"bytes"
	"io"
	"os"
	"sync"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// IsTerminal reports whether w is a terminal (isatty: the descriptor
// answers the terminal ioctl). A file, a pipe or /dev/null is not.
func IsTerminal(w any) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// Writer escapes a stream as Text does. A UTF-8 sequence split across
// writes is held back until it is complete; Flush writes what is held back
// (escaped, since it is then known to be invalid). Writer is safe for
// concurrent use.
type Writer struct {
	mu      sync.Mutex
	w       io.Writer
	pending []byte
	program bool // escape as Program does
	sgr     bool // an SGR sequence passed: Flush resets
}

// NewWriter returns a Writer escaping to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// NewProgramWriter returns a Writer escaping a program's output to w as
// Program does: colours and carriage returns pass. An SGR sequence split
// across writes is held back until it is complete; Flush ends the
// program's colours with Reset.
func NewProgramWriter(w io.Writer) *Writer { return &Writer{w: w, program: true} }

// escape is the Writer's escaping of complete text.
func (w *Writer) escape(s string) string {
	if !w.program {
		return Text(s)
	}
	out, sgr := Program(s)
	w.sgr = w.sgr || sgr
	return out
}

// Write escapes p and writes it; it reports len(p) written unless the
// underlying writer fails.
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	buf := p
	if len(w.pending) > 0 {
		buf = append(w.pending, p...)
		w.pending = nil
	}
	cut := incompleteTail(buf)
	if w.program {
		if i := bytes.LastIndexByte(buf[:cut], 0x1b); i >= 0 && sgrPrefix(string(buf[i:cut])) {
			cut = i
		}
	}
	if cut < len(buf) {
		w.pending = append([]byte(nil), buf[cut:]...)
		buf = buf[:cut]
	}
	if len(buf) == 0 {
		return len(p), nil
	}
	if _, err := io.WriteString(w.w, w.escape(string(buf))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush writes the bytes held back by an incomplete UTF-8 (or SGR)
// sequence, escaped, and Reset after a program's colours.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := ""
	if len(w.pending) > 0 {
		s = Text(string(w.pending)) // incomplete: no sequence of its own
		w.pending = nil
	}
	if w.sgr {
		s += Reset
		w.sgr = false
	}
	if s == "" {
		return nil
	}
	_, err := io.WriteString(w.w, s)
	return err
}

// incompleteTail returns where a trailing, possibly incomplete UTF-8
// sequence of b starts (len(b) when there is none).
func incompleteTail(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax+1; i-- {
		c := b[i]
		if c < utf8.RuneSelf {
			return len(b)
		}
		if utf8.RuneStart(c) {
			if !utf8.FullRune(b[i:]) {
				return i
			}
			return len(b)
		}
	}
	return len(b)
}
