package termtext

import (
	"bytes"
	"os"
	"testing"
)

func TestText(t *testing.T) {
	for in, want := range map[string]string{
		"plain text\n\tindented\n":       "plain text\n\tindented\n",
		"héllo, 世界":                      "héllo, 世界",
		"\x1b]52;c;ZXZpbA==\x07":         `\x1b]52;c;ZXZpbA==\x07`,
		"\x1b[2K\rdone: success":         `\x1b[2K\rdone: success`,
		"bad \xff\xfe utf-8":             `bad \xff\xfe utf-8`,
		"c1 \u009b31m csi":               `c1 \u009b31m csi`,
		"bidi \u202eevil\u202c":          `bidi \u202eevil\u202c`,
		"del \x7f nul \x00":              `del \x7f nul \x00`,
		`a literal \x1b stays as it was`: `a literal \x1b stays as it was`,
	} {
		if got := Text(in); got != want {
			t.Errorf("Text(%q) = %q, want %q", in, got, want)
		}
	}
	if got, want := Name("x.png\n── success ──\tz"), `x.png\n── success ──\tz`; got != want {
		t.Errorf("Name = %q, want %q", got, want)
	}
	// A name hides nothing: invisible and bidirectional characters show.
	for in, want := range map[string]string{
		"report\u200b.csv":            `report\u200b.csv`,
		"a\u200eb\u200fc\u061cd":      `a\u200eb\u200fc\u061cd`,
		"\ufeffbom \u00adsoft \u2060": `\ufeffbom \u00adsoft \u2060`,
		"line\u2028sep":               `line\u2028sep`,
		"ok \u2066iso\u2069":          `ok \u2066iso\u2069`,
		"plain-ä_名.txt":               "plain-ä_名.txt",
	} {
		if got := Name(in); got != want {
			t.Errorf("Name(%q) = %q, want %q", in, got, want)
		}
	}
	// Text keeps an emoji's joiner, and shows a bidirectional mark.
	if got, want := Text("👩\u200d💻 \u200f"), "👩\u200d💻 \\u200f"; got != want {
		t.Errorf("Text = %q, want %q", got, want)
	}
}

func TestWriterHoldsSplitRunes(t *testing.T) {
	var b bytes.Buffer
	w := NewWriter(&b)
	in := []byte("é世\x1b[31m界\n")
	for i := range in { // one byte at a time: every rune is split
		if n, err := w.Write(in[i : i+1]); n != 1 || err != nil {
			t.Fatalf("Write = %d, %v", n, err)
		}
	}
	w.Write([]byte("\xe4\xb8")) // a sequence cut short by the end of the stream
	w.Flush()
	if got, want := b.String(), "é世\\x1b[31m界\n\\xe4\\xb8"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestIsTerminal(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "f")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	if IsTerminal(f) || IsTerminal(null) || IsTerminal(&bytes.Buffer{}) {
		t.Fatal("a file, /dev/null or a buffer is a terminal")
	}
}
