package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestCellComplete(t *testing.T) {
	for _, tc := range []struct {
		lines []string
		want  bool
	}{
		{[]string{"x = 1"}, true},
		{[]string{"print('a:')  # not a block:"}, true},
		{[]string{"for i in range(3):"}, false},
		{[]string{"for i in range(3):", "    print(i)"}, false},
		{[]string{"for i in range(3):", "    print(i)", ""}, true},
		{[]string{"d = {'a':"}, false},
		{[]string{"d = {'a':", "1}"}, false},
		{[]string{"d = {'a':", "1}", ""}, true},
		{[]string{`s = """one`}, false},
		{[]string{`s = """one`, `two"""`, ""}, true},
		{[]string{"x = 1 + \\"}, false},
		{[]string{"@decorator"}, false},
		{[]string{"s = 'unclosed"}, true}, // Python says it is an error
	} {
		if got := cellComplete(tc.lines); got != tc.want {
			t.Errorf("cellComplete(%q) = %v, want %v", tc.lines, got, tc.want)
		}
	}
}

func TestLineEditor(t *testing.T) {
	for _, tc := range []struct {
		name, keys string
		history    []string
		want       string
		err        error
	}{
		{"Plain", "abc\r", nil, "abc", nil},
		{"Backspace", "abx\x7fc\r", nil, "abc", nil},
		{"LeftInsert", "ac\x1b[Db\r", nil, "abc", nil},
		{"HomeEnd", "bc\x01a\x05d\r", nil, "abcd", nil},
		{"HomeEndKeys", "bc\x1b[Ha\x1b[Fd\x1b[1~\x1b[3~B\r", nil, "Bbcd", nil},
		{"KillToEnd", "abcdef\x01\x1b[C\x1b[C\x0b\r", nil, "ab", nil},
		{"KillToStart", "abc def\x1b[D\x1b[D\x1b[D\x15\r", nil, "def", nil},
		{"KillWord", "print(x) total\x17\r", nil, "print(x) ", nil},
		{"Tab", "\tx\r", nil, "    x", nil},
		{"History", "\x1b[A\x1b[A\x1b[B\r", []string{"first", "second"}, "second", nil},
		{"HistoryEdit", "\x1b[A!\r", []string{"x = 1"}, "x = 1!", nil},
		{"UTF8", "é→\x1b[D\x7f\r", nil, "→", nil},
		{"CtrlC", "abc\x03", nil, "", errAbandon},
		{"CtrlD", "\x04", nil, "", io.EOF},
		{"CtrlDDeletes", "ab\x01\x04\r", nil, "b", nil},
		{"End", "ab", nil, "", io.EOF},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ch := make(chan byte, len(tc.keys))
			for i := 0; i < len(tc.keys); i++ {
				ch <- tc.keys[i]
			}
			close(ch)
			var out bytes.Buffer
			e := &editor{keys: keyReader{src: &byteSource{ch: ch}}, out: &out, history: tc.history}
			got, err := e.readLine(">>> ")
			if got != tc.want || err != tc.err {
				t.Fatalf("readLine = %q, %v; want %q, %v (screen %q)", got, err, tc.want, tc.err, out.String())
			}
		})
	}
	// What a program could put on the line is shown escaped.
	ch := make(chan byte, 8)
	for _, b := range []byte("\x1b]0;x\r") {
		ch <- b
	}
	close(ch)
	var out bytes.Buffer
	_, _ = (&editor{keys: keyReader{src: &byteSource{ch: ch}}, out: &out}).readLine("> ")
	if strings.Contains(out.String(), "\x1b]") {
		t.Errorf("an escape sequence reached the screen: %q", out.String())
	}
}

// TestReplTerminal types into the repl on a pseudo-terminal: state kept
// between cells, a block, history, Ctrl-C interrupting a cell (state
// kept), a figure saved in the workspace, and Ctrl-D.
func TestReplTerminal(t *testing.T) {
	master, slave := openPTY(t) // term_test.go
	t.Cleanup(func() { master.Close(); slave.Close() })
	go io.Copy(io.Discard, master) // what the terminal shows
	var out, errOut syncBuffer
	ws := t.TempDir()
	done := make(chan int, 1)
	go func() {
		done <- run(context.Background(), []string{"repl", "--workdir", ws}, stdio{in: slave, out: &out, err: &errOut})
	}()
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(90 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("waiting for %s: stdout %q, stderr %q", what, out.String(), errOut.String())
			}
		}
	}
	typeKeys := func(s string) {
		if _, err := master.WriteString(s); err != nil {
			t.Fatal(err)
		}
	}
	waitFor("the banner", func() bool { return strings.Contains(errOut.String(), "Ctrl-D quits") })
	typeKeys("x = 6\r")
	typeKeys("x * 7\r")
	waitFor("the first result", func() bool { return strings.Contains(out.String(), "42\n") })
	typeKeys("for i in range(2):\r")
	typeKeys("\tprint('row', i)\r\r")
	waitFor("the block's output", func() bool { return strings.Contains(out.String(), "row 1\n") })
	typeKeys("\x1b[A\x1b[A\x1b[A\x7f8\r") // x * 7 becomes x * 8
	waitFor("the edited line's result", func() bool { return strings.Contains(out.String(), "48\n") })
	typeKeys("import time; time.sleep(60)\r")
	time.Sleep(time.Second)
	typeKeys("\x03")
	waitFor("the interrupt", func() bool { return strings.Contains(errOut.String(), "KeyboardInterrupt") })
	typeKeys("x\r")
	waitFor("the state after the interrupt", func() bool { return strings.Contains(out.String(), "6\n") })
	typeKeys("import matplotlib.pyplot as plt; plt.plot([1, 2]); None\r")
	waitFor("the figure", func() bool { return strings.Contains(errOut.String(), "[figure saved as figure-1.png]") })
	typeKeys("\x04")
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit %d, stderr %s", code, errOut.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the repl did not end on Ctrl-D")
	}
	if _, err := os.Stat(filepath.Join(ws, "figure-1.png")); err != nil {
		t.Fatal(err)
	}
}
