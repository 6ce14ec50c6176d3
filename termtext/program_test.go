package termtext

import (
	"bytes"
	"strings"
	"testing"
)

// TestProgram: a program's colours and carriage returns pass; every other
// control sequence (cursor moves, OSC, a CSI that is not SGR, an SGR too
// long to be one) is escaped as Text escapes it.
func TestProgram(t *testing.T) {
	for in, want := range map[string]string{
		"plain\n":                                "plain\n",
		"\x1b[31mred\x1b[0m\n":                   "\x1b[31mred\x1b[0m\n",
		"\x1b[1;38;2;255;0;0mrgb\x1b[m":          "\x1b[1;38;2;255;0;0mrgb\x1b[m",
		" 50%\r100%\n":                           " 50%\r100%\n",
		"\x1b[2K\x1b[1Aup":                       `\x1b[2K\x1b[1Aup`,
		"\x1b]52;c;ZXZpbA==\x07":                 `\x1b]52;c;ZXZpbA==\x07`,
		"\u009b31m":                              `\u009b31m`,
		"\x1b[" + strings.Repeat("1;", 20) + "m": `\x1b[` + strings.Repeat("1;", 20) + "m",
		"\x1b":                                   `\x1b`,
	} {
		if got, _ := Program(in); got != want {
			t.Errorf("Program(%q) = %q, want %q", in, got, want)
		}
	}
	if _, sgr := Program("no colour\r"); sgr {
		t.Error("a carriage return counted as a colour")
	}
	if _, sgr := Program("\x1b[32mok"); !sgr {
		t.Error("a colour not counted")
	}
}

// TestProgramWriter: an SGR sequence split across writes passes whole;
// Flush resets the program's colours; a held-back ESC that never becomes
// one is escaped.
func TestProgramWriter(t *testing.T) {
	var b bytes.Buffer
	w := NewProgramWriter(&b)
	for _, p := range []string{"a\x1b", "[3", "1mred", " \x1b[", "2Jx"} {
		w.Write([]byte(p))
	}
	w.Flush()
	if want := "a\x1b[31mred " + `\x1b[2Jx` + Reset; b.String() != want {
		t.Fatalf("got %q, want %q", b.String(), want)
	}
	b.Reset()
	w = NewProgramWriter(&b)
	w.Write([]byte("end\x1b"))
	w.Flush()
	if b.String() != `end\x1b` {
		t.Fatalf("a trailing ESC: %q", b.String())
	}
}
