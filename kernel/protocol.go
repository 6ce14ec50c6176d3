package kernel

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"sync"
	"unicode/utf8"

	"github.com/codeagent/codeagent/internal/lazyre"
	"github.com/codeagent/codeagent/sandbox"
)

// The host's side of kernel.py's protocol. Everything the kernel writes
// is untrusted: a line longer than maxLine is dropped (and the cell
// flagged), a message for another cell than the one under way is dropped,
// MIME types are an allow list, every value and the cell's total are
// bounded, and stream data beyond the cell's output cap is counted, not
// kept. The kernel never blocks on us: dropping is how we bound it.

// Bounds of what a kernel may send.
const (
	maxLine        = 24 << 20 // one message: a PNG of 8 MiB, base64, in JSON
	maxDisplays    = 64       // display items of one cell
	maxDisplayData = 32 << 20 // their total size
	maxTextValue   = 2 << 20  // one text value of a MIME bundle
	maxPNG         = 8 << 20  // one image, decoded
)

// mimeTypes are the MIME types a bundle may carry.
var mimeTypes = map[string]bool{"text/plain": true, "text/html": true, "text/markdown": true, "image/svg+xml": true, "image/png": true}

var figureName = lazyre.New(`^figure-[0-9]{1,6}\.png$`)

// message is one line from the kernel.
type message struct {
	T         string          `json:"t"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Data      json.RawMessage `json:"data"`
	Kind      string          `json:"kind"`
	File      string          `json:"file"`
	EName     string          `json:"ename"`
	EValue    string          `json:"evalue"`
	Status    string          `json:"status"`
	ExitCode  int             `json:"exit_code"`
	Count     int             `json:"count"`
	Preloaded bool            `json:"preloaded"`
}

// Display is one MIME bundle shown below a cell, as Jupyter's display
// data: kind "result" (the value of the cell's last expression), "display"
// (display(...)) or "figure" (a matplotlib figure left open, also saved in
// the workspace as File). Data maps MIME types (text/plain, text/html,
// text/markdown, image/svg+xml, image/png as base64) to values.
type Display struct {
	Kind string            `json:"kind"`
	Data map[string]string `json:"data"`
	File string            `json:"file,omitempty"`
}

// cell is the state of the cell under way, filled by the protocol.
type cell struct {
	id             string
	stdout, stderr *sandbox.CappedBuffer
	onOutput       func(stream string, data []byte)

	mu           sync.Mutex
	displays     []Display
	displaySize  int
	dropped      int // displays or messages left out
	images       []string
	errName      string
	errValue     string
	status       string
	exitCode     int
	count        int
	done         chan struct{}
	doneReceived bool
}

func newCell(id string, output int64, onOutput func(string, []byte)) *cell {
	return &cell{id: id, stdout: &sandbox.CappedBuffer{Cap: output}, stderr: &sandbox.CappedBuffer{Cap: output},
		onOutput: onOutput, done: make(chan struct{})}
}

// decoder splits what the kernel writes into lines, bounded.
type decoder struct {
	buf      []byte
	skipping bool // in a line longer than maxLine
	handle   func(line []byte, tooLong bool)
}

func (d *decoder) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk = p[:i]
		}
		if !d.skipping {
			if len(d.buf)+len(chunk) > maxLine {
				d.skipping, d.buf = true, d.buf[:0]
			} else {
				d.buf = append(d.buf, chunk...)
			}
		}
		if i < 0 {
			break
		}
		d.handle(d.buf, d.skipping)
		d.buf, d.skipping = d.buf[:0], false
		if cap(d.buf) > 1<<20 {
			d.buf = nil // do not keep a large buffer between messages
		}
		p = p[i+1:]
	}
	return n, nil
}

// apply records message m in c; it reports whether m was the cell's end.
func (c *cell) apply(m *message) {
	switch m.T {
	case "stream":
		var s string
		if json.Unmarshal(m.Data, &s) != nil {
			return
		}
		data, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return
		}
		out := c.stdout
		if m.Name == "stderr" {
			out = c.stderr
		} else if m.Name != "stdout" {
			return
		}
		_, _ = out.Write(data)
		if c.onOutput != nil {
			c.onOutput(m.Name, data)
		}
	case "display":
		c.addDisplay(m)
	case "error":
		c.mu.Lock()
		c.errName, c.errValue = clip(m.EName, 256), clip(m.EValue, 4096)
		c.mu.Unlock()
	case "done":
		c.mu.Lock()
		if !c.doneReceived {
			c.doneReceived = true
			c.status, c.exitCode, c.count = m.Status, m.ExitCode, m.Count
			close(c.done)
		}
		c.mu.Unlock()
	}
}

func (c *cell) addDisplay(m *message) {
	var raw map[string]string
	if json.Unmarshal(m.Data, &raw) != nil {
		return
	}
	d := Display{Kind: m.Kind, Data: map[string]string{}}
	if d.Kind != "result" && d.Kind != "display" && d.Kind != "figure" {
		d.Kind = "display"
	}
	size := 0
	for mime, v := range raw {
		if !mimeTypes[mime] {
			continue
		}
		if mime == "image/png" {
			png, err := base64.StdEncoding.DecodeString(v)
			if err != nil || len(png) > maxPNG || !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) {
				continue
			}
		} else if len(v) > maxTextValue || !utf8.ValidString(v) {
			continue
		}
		d.Data[mime] = v
		size += len(v)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.displays) >= maxDisplays || c.displaySize+size > maxDisplayData || len(d.Data) == 0 {
		c.dropped++
		return
	}
	if figureName.MatchString(m.File) && d.Kind == "figure" && len(c.images) < maxDisplays {
		d.File = m.File
		c.images = append(c.images, m.File)
	}
	c.displays = append(c.displays, d)
	c.displaySize += size
}

func clip(s string, n int) string {
	if len(s) > n {
		s = s[:n]
	}
	return string(bytes.ToValidUTF8([]byte(s), []byte("\uFFFD")))
}
