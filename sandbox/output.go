package sandbox

import (
	"io"
	"sync"
)

// CappedBuffer keeps the first Cap bytes written to it and counts the rest,
// never failing a write, so that a program is not blocked on a full pipe.
// When Live is set, kept bytes are also copied to it as they arrive.
//
// With Stream set, everything goes to Live and nothing is kept or counted
// (Spec.Stream).
type CappedBuffer struct {
	Cap    int64
	Live   io.Writer
	Stream bool

	mu        sync.Mutex
	buf       []byte
	total     int64
	liveBroke bool
}

// Write implements io.Writer; it always reports len(p) bytes written.
func (c *CappedBuffer) Write(p []byte) (int, error) {
	if c.Stream {
		if c.Live != nil {
			_, _ = c.Live.Write(p)
		}
		return len(p), nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.total += int64(len(p))
	room := c.Cap - int64(len(c.buf))
	if room <= 0 {
		return len(p), nil
	}
	keep := p
	if int64(len(keep)) > room {
		keep = keep[:room]
	}
	c.buf = append(c.buf, keep...)
	if c.Live != nil && !c.liveBroke {
		if _, err := c.Live.Write(keep); err != nil {
			c.liveBroke = true // a closed terminal must not stop the program
		}
	}
	return len(p), nil
}

// Bytes returns the kept output.
func (c *CappedBuffer) Bytes() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]byte(nil), c.buf...)
}

// Truncated reports whether more was written than kept.
func (c *CappedBuffer) Truncated() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total > int64(len(c.buf))
}

// Total is the number of bytes written, kept or not.
func (c *CappedBuffer) Total() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total
}
