package llm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"sync"
	"unicode/utf8"
)

// DefaultMaxAnswerBytes is the answer size cap when Config.MaxAnswerBytes
// is 0: far above any program a model writes, far below what would hurt.
const DefaultMaxAnswerBytes = 1 << 20

// Raw body allowances over the answer cap. JSON escapes make a body longer
// than its text (at most 6 bytes per byte for \u00XX); a stream wraps every
// few characters in an envelope of some 150 bytes, so its total is bounded
// loosely, but each of its events tightly.
const (
	bodySlack        = 64 << 10
	jsonBodyFactor   = 6
	streamBodyFactor = 64
)

// ReadError is a failure while reading an answer, with how much of it had
// arrived; [TransportError] uses the count in its message.
type ReadError struct {
	Received int64 // bytes of the answer (or its body) that arrived
	Err      error
}

func (e *ReadError) Error() string { return e.Err.Error() }
func (e *ReadError) Unwrap() error { return e.Err }

// WithReceived wraps err, unless nil, with the number of answer bytes that
// had arrived; an outer count replaces an inner one.
func WithReceived(err error, n int64) error {
	if err == nil || n <= 0 {
		return err
	}
	var e *Error
	if errors.As(err, &e) {
		return err // already classified
	}
	return &ReadError{Received: n, Err: err}
}

// AnswerBody watches the body of one answer as the SDK reads it: it counts
// the bytes, stops the read with a [KindTooLarge] error at the size cap
// (so that an endless answer is never buffered whole), notes bytes that are
// not valid UTF-8 before any decoder replaces them with U+FFFD, and, for a
// stream, whether the server ended it with "data: [DONE]". Make one per
// request with [NewAnswerBody] and install [AnswerBody.Wrap] in the SDK's
// middleware after [ErrorFromResponse].
type AnswerBody struct {
	ep  Endpoint
	max int64 // the answer cap

	mu       sync.Mutex
	n        int64
	invalid  bool
	done     bool
	stream   bool
	event    int64  // bytes of the current SSE event
	pending  []byte // an incomplete UTF-8 sequence at the end of the last read
	line     []byte // the start of the current line, up to 16 bytes
	lineFull bool
}

// NewAnswerBody returns a watcher for an answer from ep capped at max bytes
// (0: [DefaultMaxAnswerBytes]).
func NewAnswerBody(ep Endpoint, max int64) *AnswerBody {
	if max <= 0 {
		max = DefaultMaxAnswerBytes
	}
	return &AnswerBody{ep: ep, max: max}
}

// Wrap is SDK middleware glue: it wraps a successful response's body.
func (b *AnswerBody) Wrap(res *http.Response, err error) (*http.Response, error) {
	if err != nil || res == nil || res.Body == nil {
		return res, err
	}
	mt, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type"))
	b.mu.Lock()
	b.stream = mt == "text/event-stream"
	b.mu.Unlock()
	res.Body = &watchedBody{rc: res.Body, b: b}
	return res, nil
}

// Received is the number of body bytes read so far.
func (b *AnswerBody) Received() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.n
}

// InvalidUTF8 reports whether the body held bytes that are not UTF-8.
func (b *AnswerBody) InvalidUTF8() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.invalid
}

// Done reports whether a stream's "data: [DONE]" line was read.
func (b *AnswerBody) Done() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.done
}

// Annotate adds to err how much of the body had arrived, unless err says
// already (some SDKs replace a failed read's error with their context's).
func (b *AnswerBody) Annotate(err error) error {
	var re *ReadError
	if err == nil || errors.As(err, &re) {
		return err
	}
	return WithReceived(err, b.Received())
}

// Max is the answer cap in bytes.
func (b *AnswerBody) Max() int64 { return b.max }

type watchedBody struct {
	rc io.ReadCloser
	b  *AnswerBody
}

func (w *watchedBody) Read(p []byte) (int, error) {
	n, err := w.rc.Read(p)
	if n > 0 {
		if lerr := w.b.see(p[:n]); lerr != nil {
			return n, lerr
		}
	}
	if err != nil && err != io.EOF {
		err = WithReceived(err, w.b.Received())
	}
	return n, err
}

func (w *watchedBody) Close() error { return w.rc.Close() }

// see accounts for p and returns the error that ends the read, if any.
func (b *AnswerBody) see(p []byte) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.n += int64(len(p))
	if !b.invalid {
		b.checkUTF8(p)
	}
	limit := b.max*jsonBodyFactor + bodySlack
	if b.stream {
		limit = b.max*streamBodyFactor + bodySlack
		if b.scanEvents(p) > b.max*jsonBodyFactor+bodySlack {
			return AnswerTooLarge(b.ep, b.max)
		}
	}
	if b.n > limit {
		return AnswerTooLarge(b.ep, b.max)
	}
	return nil
}

// checkUTF8 validates p, continuing a sequence cut at the last read's end.
// A correctly encoded U+FFFD is valid; a byte that is not UTF-8 is not.
func (b *AnswerBody) checkUTF8(p []byte) {
	if len(b.pending) > 0 {
		k := min(utf8.UTFMax-len(b.pending), len(p))
		head := append(append([]byte(nil), b.pending...), p[:k]...)
		if !utf8.FullRune(head) {
			b.pending = head
			return
		}
		r, size := utf8.DecodeRune(head)
		if r == utf8.RuneError && size == 1 {
			b.invalid = true
			return
		}
		p = p[size-len(b.pending):]
		b.pending = nil
	}
	// Keep an incomplete sequence at the end for the next read.
	tail := 0
	for i := len(p) - 1; i >= 0 && i >= len(p)-utf8.UTFMax; i-- {
		if utf8.RuneStart(p[i]) {
			if !utf8.FullRune(p[i:]) {
				tail = len(p) - i
			}
			break
		}
	}
	if !utf8.Valid(p[:len(p)-tail]) {
		b.invalid = true
		return
	}
	b.pending = append(b.pending[:0], p[len(p)-tail:]...)
}

// scanEvents follows SSE lines: it notes the [DONE] line and returns the
// size of the event being read (events end at a blank line).
func (b *AnswerBody) scanEvents(p []byte) int64 {
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk = p[:i]
		}
		b.event += int64(len(chunk))
		if !b.lineFull {
			room := 16 - len(b.line)
			b.line = append(b.line, chunk[:min(room, len(chunk))]...)
			b.lineFull = len(chunk) >= room
		}
		if i < 0 {
			break
		}
		line := bytes.TrimRight(b.line, "\r")
		switch {
		case len(line) == 0:
			b.event = 0 // a blank line ends the event
		case string(line) == "data: [DONE]" || string(line) == "data:[DONE]":
			b.done = true
		}
		b.line, b.lineFull = b.line[:0], false
		p = p[i+1:]
	}
	return b.event
}

// AnswerTooLarge is the error for an answer over the cap of max bytes.
func AnswerTooLarge(ep Endpoint, max int64) *Error {
	return &Error{Kind: KindTooLarge, Provider: ep.Provider,
		Message: fmt.Sprintf("the answer from %s was larger than the answer size limit of %s, so the rest was not read: ask for a shorter answer, or raise the limit (--max-answer)", ep.addr(), FormatBytes(max))}
}

// FormatBytes renders n bytes for messages, e.g. "1 MiB" or "312 bytes".
func FormatBytes(n int64) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d bytes", n)
	case n < 1<<20:
		return trimZero(float64(n)/(1<<10)) + " KiB"
	case n < 1<<30:
		return trimZero(float64(n)/(1<<20)) + " MiB"
	}
	return trimZero(float64(n)/(1<<30)) + " GiB"
}

func trimZero(f float64) string {
	s := fmt.Sprintf("%.1f", f)
	if len(s) > 2 && s[len(s)-2:] == ".0" {
		s = s[:len(s)-2]
	}
	return s
}
