package lang

import (
	"bytes"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
)

// traceRunner is the Python runner of traced programs (trace.py).
//
//go:embed trace.py
var traceRunner string

// TraceMark starts the marker lines between which a traced Python program
// writes its trace on stderr when it dies of an uncaught exception: the
// trace opens with the line TraceMark+" "+key+" ====" and closes with
// TraceMark+" "+key+" end ====", where key is the run's TraceKey.
const TraceMark = "==== codeagent trace"

// TraceKey is the secret of one traced run: the runner reads it as the
// first line of its standard input, before the program's code runs, and
// writes it into the trace's marker lines, so that text the program
// writes itself in the markers' shape is not taken for a trace. It is not
// in the program's argv, environment or files, and the runner has read it
// from stdin before the program can; it is in the interpreter's memory,
// where the runner needs it to write the trace (see docs/RUN.md).
type TraceKey string

// NewTraceKey returns a fresh key: 32 hex digits from crypto/rand.
func NewTraceKey() TraceKey {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return TraceKey(hex.EncodeToString(b[:]))
}

// Stdin is what a traced run's standard input must start with: the key
// and a newline. The runner reads exactly that; the program's own input,
// if any, follows it. A runner that gets no key writes no trace.
func (k TraceKey) Stdin() []byte { return []byte(string(k) + "\n") }

// TracedCommand returns the argv that runs the program at path so that,
// when it fails with an uncaught exception, it writes the values its last
// frames held after its traceback (see TraceKey.Split): for Python,
// `python3 -c RUNNER path`, which runs the program as `python3 path` would
// and otherwise behaves the same (its traceback, argv, __file__, exit
// status, and the input after the key's line; the namespace backend's warm
// interpreters take it as they take the plain command). Its stdin must
// start with TraceKey.Stdin. Other languages: Command(path).
func (l Language) TracedCommand(path string) []string {
	if l.Name != "python" {
		return l.Command(path)
	}
	return append(append([]string(nil), l.Interpreter...), "-c", traceRunner, path)
}

// Split takes the trace that the runner given k wrote out of a traced
// program's stderr: stderr as the program wrote it, and the trace (frames
// and values as text), "" when there is none. Only marker lines that
// carry k count; a trace cut off by the output limit is kept as far as it
// got.
func (k TraceKey) Split(stderr []byte) ([]byte, string) {
	if k == "" {
		return stderr, ""
	}
	begin := []byte("\n" + TraceMark + " " + string(k) + " ====\n")
	i := bytes.LastIndex(stderr, begin)
	if i < 0 {
		return stderr, ""
	}
	rest := stderr[i+len(begin):]
	end := []byte(TraceMark + " " + string(k) + " end ====\n")
	j := bytes.Index(rest, end)
	if j < 0 {
		return stderr[:i:i], string(rest)
	}
	return append(stderr[:i:i], rest[j+len(end):]...), string(rest[:j])
}
