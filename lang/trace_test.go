package lang

import (
	"slices"
	"testing"
)

// TestSplitTrace: the trace comes out of stderr, what the program wrote
// after it stays, a trace cut by the output limit is kept as far as it
// got, and stderr without one is left alone.
func TestSplitTrace(t *testing.T) {
	const tb = "Traceback (most recent call last):\nZeroDivisionError: division by zero\n"
	for _, c := range []struct{ in, out, trace string }{
		{tb, tb, ""},
		{tb + "\n" + TraceMark + "\nin f(), line 2:\n    x = 0\n" + TraceMark + " end\n", tb, "in f(), line 2:\n    x = 0\n"},
		{tb + "\n" + TraceMark + "\nin f(), line 2:\n" + TraceMark + " end\natexit ran\n", tb + "atexit ran\n", "in f(), line 2:\n"},
		{tb + "\n" + TraceMark + "\nin f(), line 2:\n    x = 0", tb, "in f(), line 2:\n    x = 0"},
		{TraceMark + "\nnot at a line's start\n", TraceMark + "\nnot at a line's start\n", ""},
	} {
		out, trace := SplitTrace([]byte(c.in))
		if string(out) != c.out || trace != c.trace {
			t.Errorf("SplitTrace(%q) = %q, %q; want %q, %q", c.in, out, trace, c.out, c.trace)
		}
	}
}

// TestTracedCommand: Python programs run through the runner with their
// path last; other languages run as ever.
func TestTracedCommand(t *testing.T) {
	py, _ := Lookup("python")
	if c := py.TracedCommand("/workspace/solution.py"); len(c) != 4 || c[0] != "python3" || c[1] != "-c" || c[3] != "/workspace/solution.py" {
		t.Errorf("python: %q", c)
	}
	for _, name := range []string{"javascript", "bash"} {
		l, _ := Lookup(name)
		if got, want := l.TracedCommand("/workspace/p"), l.Command("/workspace/p"); !slices.Equal(got, want) {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
}
