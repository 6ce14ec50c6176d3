package termtext

import (
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
}

// NewWriter returns a Writer escaping to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

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
	if cut < len(buf) {
		w.pending = append([]byte(nil), buf[cut:]...)
		buf = buf[:cut]
	}
	if len(buf) == 0 {
		return len(p), nil
	}
	if _, err := io.WriteString(w.w, Text(string(buf))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush writes the bytes held back by an incomplete UTF-8 sequence.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.pending) == 0 {
		return nil
	}
	s := Text(string(w.pending))
	w.pending = nil
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
