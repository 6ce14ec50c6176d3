package lang

import (
	"bytes"
	_ "embed"
)

// traceRunner is the Python runner of traced programs (trace.py).
//
//go:embed trace.py
var traceRunner string

// TraceMark opens the trace a traced Python program writes on stderr when
// it dies of an uncaught exception; TraceMark+" end" closes it.
const TraceMark = "==== codeagent trace ===="

// TracedCommand returns the argv that runs the program at path so that,
// when it fails with an uncaught exception, it writes the values its last
// frames held after its traceback (see SplitTrace): for Python, `python3
// -c RUNNER path`, which runs the program as `python3 path` would and
// otherwise behaves the same (its traceback, argv, __file__, exit status;
// the namespace backend's warm interpreters take it as they take the
// plain command). Other languages: Command(path).
func (l Language) TracedCommand(path string) []string {
	if l.Name != "python" {
		return l.Command(path)
	}
	return append(append([]string(nil), l.Interpreter...), "-c", traceRunner, path)
}

// SplitTrace takes the trace out of a traced program's stderr: stderr as
// the program wrote it, and the trace (frames and values as text), "" when
// there is none. A trace cut off by the output limit is kept as far as it
// got.
func SplitTrace(stderr []byte) ([]byte, string) {
	begin := []byte("\n" + TraceMark + "\n")
	i := bytes.LastIndex(stderr, begin)
	if i < 0 {
		return stderr, ""
	}
	rest := stderr[i+len(begin):]
	end := []byte(TraceMark + " end\n")
	j := bytes.Index(rest, end)
	if j < 0 {
		return stderr[:i:i], string(rest)
	}
	return append(stderr[:i:i], rest[j+len(end):]...), string(rest[:j])
}
