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

// TestProgramDropsConceal: SGR 8 (conceal) never reaches the terminal,
// whatever its spelling (alone, among colours, with leading zeros, after
// an empty parameter, split across writes), while the colours around it
// pass; 8 as a colour's value (38;5;8 grey, 48;2;8;8;8) is a colour and
// stays, and a sequence left empty is dropped, not sent as ESC [ m (a
// reset the program did not ask for).
func TestProgramDropsConceal(t *testing.T) {
	for in, want := range map[string]string{
		"\x1b[8mhidden\x1b[28m":            "hidden\x1b[28m",
		"\x1b[31;8mhidden":                 "\x1b[31mhidden",
		"\x1b[8;1;32mhidden":               "\x1b[1;32mhidden",
		"\x1b[008mhidden":                  "hidden",
		"\x1b[;8mhidden":                   "\x1b[mhidden",
		"\x1b[38;5;8mgrey":                 "\x1b[38;5;8mgrey",
		"\x1b[48;2;8;8;8;8mdark":           "\x1b[48;2;8;8;8mdark",
		"\x1b[38:5:8;8mgrey":               "\x1b[38:5:8mgrey",
		"\x1b[8:1mhidden":                  "hidden",
		"\x1b[38;5;8;48;5;8;8mtwo colours": "\x1b[38;5;8;48;5;8mtwo colours",
		"\x1b[18;28m":                      "\x1b[18;28m",
	} {
		if got, _ := Program(in); got != want {
			t.Errorf("Program(%q) = %q, want %q", in, got, want)
		}
	}
	if _, sgr := Program("\x1b[8mx"); sgr {
		t.Error("a dropped sequence counted as a colour")
	}
	var b bytes.Buffer
	w := NewProgramWriter(&b)
	for _, p := range []string{"a\x1b[3", "1;0", "8mhidden"} {
		w.Write([]byte(p))
	}
	w.Flush()
	if want := "a\x1b[31mhidden" + Reset; b.String() != want {
		t.Fatalf("split across writes: got %q, want %q", b.String(), want)
	}
}
