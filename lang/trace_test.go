package lang

import (
	"regexp"
	"slices"
	"testing"
)

// TestTraceKeySplit: the trace comes out of stderr only between marker
// lines that carry the run's key; what the program wrote after it stays,
// a trace cut by the output limit is kept as far as it got, and stderr
// without one is left alone, as is text in the markers' shape with
// another key, no key or the markers of before keys (a program's own).
func TestTraceKeySplit(t *testing.T) {
	const tb = "Traceback (most recent call last):\nZeroDivisionError: division by zero\n"
	k := TraceKey("0123456789abcdef0123456789abcdef")
	begin, end := "\n"+TraceMark+" "+string(k)+" ====\n", TraceMark+" "+string(k)+" end ====\n"
	forged := "\n" + TraceMark + " ffffffffffffffffffffffffffffffff ====\nhidden\n" + TraceMark + " ffffffffffffffffffffffffffffffff end ====\n"
	old := "\n==== codeagent trace ====\nhidden\n==== codeagent trace ==== end\n"
	for _, c := range []struct{ in, out, trace string }{
		{tb, tb, ""},
		{tb + begin + "in f(), line 2:\n    x = 0\n" + end, tb, "in f(), line 2:\n    x = 0\n"},
		{tb + begin + "in f(), line 2:\n" + end + "atexit ran\n", tb + "atexit ran\n", "in f(), line 2:\n"},
		{tb + begin + "in f(), line 2:\n    x = 0", tb, "in f(), line 2:\n    x = 0"},
		{begin[1:] + "not at a line's start\n", begin[1:] + "not at a line's start\n", ""},
		{tb + forged, tb + forged, ""},
		{tb + old, tb + old, ""},
		{tb + "\n" + TraceMark + "  ====\nhidden\n" + TraceMark + "  end ====\n", tb + "\n" + TraceMark + "  ====\nhidden\n" + TraceMark + "  end ====\n", ""},
		{tb + forged + begin + "in f(), line 2:\n" + end, tb + forged, "in f(), line 2:\n"},
	} {
		out, trace := k.Split([]byte(c.in))
		if string(out) != c.out || trace != c.trace {
			t.Errorf("Split(%q) = %q, %q; want %q, %q", c.in, out, trace, c.out, c.trace)
		}
	}
	if out, trace := TraceKey("").Split([]byte(tb + "\n" + TraceMark + "  ====\nx\n")); string(out) != tb+"\n"+TraceMark+"  ====\nx\n" || trace != "" {
		t.Errorf("the empty key split %q, %q", out, trace)
	}
}

// TestNewTraceKey: keys are 32 hex digits, the runner's stdin line is
// the key and a newline, and two keys differ.
func TestNewTraceKey(t *testing.T) {
	a, b := NewTraceKey(), NewTraceKey()
	if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(string(a)) || a == b {
		t.Errorf("keys %q, %q", a, b)
	}
	if got := string(a.Stdin()); got != string(a)+"\n" {
		t.Errorf("Stdin() = %q", got)
	}
}

// TestTracedCommand: Python programs run through the runner with their
// path last, and no key in the argv; other languages run as ever.
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
