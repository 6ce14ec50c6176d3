package kubernetes

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
)

// Frames between codeagent and the Pod's agent (agent.py): a type byte, a
// 4-byte big-endian length and the payload.
const (
	// codeagent to the agent
	frameHeader = 'H' // JSON: the run's limits
	frameDir    = 'D' // mode (4), path
	frameFile   = 'W' // to the agent: mode (4), size (8), path; back: mode, size, blocks (8), path
	frameChunk  = 'C' // offset (8), bytes of the file last named
	frameLink   = 'L' // path length (2), path, target
	frameCode   = 'P' // as frameFile, an absolute path under /code
	frameStaged = 'S' // the workspace is complete
	frameKill   = 'K' // the reason
	// the agent to codeagent
	frameReady     = 'A' // JSON: the pid of the program's exec
	frameBegin     = 'B' // JSON: staged, the program may start
	frameEnd       = 'E' // JSON: why the run ended, CPU, peak memory, OOM kills
	frameUnchanged = 'U' // path
	frameFileEnd   = 'F' // the file's chunks are complete
	frameDone      = 'Z' // the workspace is complete
	frameError     = 'X' // JSON: the agent failed
)

// maxFrame bounds a frame's payload from the agent: chunks are 256 KiB.
const maxFrame = 1 << 20

// frameWriter writes frames; safe for concurrent use. Each write to the
// exec stream becomes a message through the API server and the kubelet,
// so frames are gathered: queue buffers one, send writes it with all that
// was queued.
type frameWriter struct {
	mu  sync.Mutex
	buf []byte
	w   io.Writer
}

// flushAt is how much queue gathers before it writes.
const flushAt = 256 << 10

func (f *frameWriter) append(t byte, payload []byte) {
	f.buf = append(f.buf, t)
	f.buf = binary.BigEndian.AppendUint32(f.buf, uint32(len(payload)))
	f.buf = append(f.buf, payload...)
}

func (f *frameWriter) flushLocked() error {
	if len(f.buf) == 0 {
		return nil
	}
	_, err := f.w.Write(f.buf)
	f.buf = f.buf[:0]
	return err
}

// queue adds a frame, written with the next send or once flushAt is queued.
func (f *frameWriter) queue(t byte, payload []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.append(t, payload)
	if len(f.buf) < flushAt {
		return nil
	}
	return f.flushLocked()
}

// send writes the queued frames and this one.
func (f *frameWriter) send(t byte, payload []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.append(t, payload)
	return f.flushLocked()
}

func (f *frameWriter) sendJSON(t byte, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return f.send(t, b)
}

type frame struct {
	t byte
	p []byte
}

// frameReader reads frames from the agent, refusing oversized ones.
type frameReader struct{ r *bufio.Reader }

func newFrameReader(r io.Reader) *frameReader { return &frameReader{bufio.NewReaderSize(r, 64<<10)} }

func (f *frameReader) next() (frame, error) {
	var h [5]byte
	if _, err := io.ReadFull(f.r, h[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			err = io.EOF
		}
		return frame{}, err
	}
	n := binary.BigEndian.Uint32(h[1:])
	if n > maxFrame {
		return frame{}, fmt.Errorf("agent frame of %d bytes", n)
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(f.r, p); err != nil {
		return frame{}, fmt.Errorf("agent frame: %w", err)
	}
	return frame{h[0], p}, nil
}

// agentEnd is the payload of frameEnd.
type agentEnd struct {
	Reason string `json:"reason"` // exit, disk, deadline, cancel, timeout, recover
	CPU    int64  `json:"cpu_ns"`
	Peak   int64  `json:"peak"`
	OOM    int64  `json:"oom"` // -1: unknown
}

// agentHeader is the payload of frameHeader.
type agentHeader struct {
	Disk       int64 `json:"disk"`
	DeadlineMS int64 `json:"deadline_ms"`
	PollMS     int64 `json:"poll_ms"`
	Cap        int64 `json:"cap"` // bytes of file content to send back at most
}
