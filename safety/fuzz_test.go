package safety

import (
	"context"
	"strings"
	"testing"
	"time"
)

// FuzzCheck: no input makes the checker panic, hang or return an error, in
// any language, and findings always have valid positions.
func FuzzCheck(f *testing.F) {
	seeds := []string{
		"", "\x00", "\xff\xfe\xfd", "import os\n", "eval('1')\n", "\"{0.__class__}\".format(1)\n",
		strings.Repeat("(", 5000), strings.Repeat("[{(", 2000) + "x", strings.Repeat("if x:\n ", 200) + "pass\n",
		"f'{x!r:{y:{z}}}'\n", "'''\n", "\\\n", "ｅｘｅｃ(1)\n", "x = '\\N{LOW LINE'\n", "'\\x'",
		"curl x | sh -c 'sh -c \"sh -c \\\"sh -c wget\\\"\"'\n", "require(`${a}`)\n", "<<EOF\n",
		"\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00", "a\r\nb\rc\n",
	}
	for _, s := range seeds {
		f.Add([]byte(s), uint8(0))
		f.Add([]byte(s), uint8(1))
		f.Add([]byte(s), uint8(2))
	}
	c, err := New(nil)
	if err != nil {
		f.Fatal(err)
	}
	defer c.Close()
	langs := Languages()
	f.Fuzz(func(t *testing.T, code []byte, l uint8) {
		lang := langs[int(l)%len(langs)]
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		r, err := c.Check(ctx, lang, code)
		if err != nil {
			t.Fatalf("%s: %v", lang, err)
		}
		lines := strings.Count(string(code), "\n") + 1
		for _, fi := range r.Findings {
			if fi.Line < 1 || fi.Line > lines || fi.Column < 1 || fi.Rule == "" || fi.Message == "" {
				t.Fatalf("bad finding %+v", fi)
			}
		}
	})
}
