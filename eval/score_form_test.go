package eval

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
)

// The score says which program it scored and the hash of the code given.
func TestScoreRecordsFormAndHash(t *testing.T) {
	_, raw := humanEvalByID(t)
	for _, c := range []struct {
		name, code, form string
	}{
		{"whole module", module(t, "HumanEval/2"), FormModule},
		{"body only", raw["HumanEval/2"].Canonical, FormCompletion},
		{"module without the prompt's import", "def truncate_number(number):\n    return number % 1.0\n", FormModule},
		{"entry only, prompt with a helper", "def decode_cyclic(s):\n    return encode_cyclic(encode_cyclic(s))\n", FormCompletion},
	} {
		id := "HumanEval/2"
		if c.name == "entry only, prompt with a helper" {
			id = "HumanEval/38"
		}
		s := scoreCode(t, id, c.code)
		sum := sha256.Sum256([]byte(c.code))
		if !s.Passed || s.Form != c.form || s.CodeSHA256 != hex.EncodeToString(sum[:]) {
			t.Errorf("%s: passed %v, form %q (want %q), sha %s\n%s", c.name, s.Passed, s.Form, c.form, s.CodeSHA256, s.Output)
		}
	}
}

// A failure reports the exception and its class, never the secret.
func TestScoreFailureOutput(t *testing.T) {
	s := scoreCode(t, "HumanEval/2", "def truncate_number(number):\n    print('debug line')\n    return 7\n")
	if s.Passed || s.Class != "assertion" || !strings.Contains(s.Output, "AssertionError") || !strings.Contains(s.Output, "debug line") || strings.Contains(s.Output, "pass-") {
		t.Errorf("class %s, output:\n%s", s.Class, s.Output)
	}
	s = scoreCode(t, "HumanEval/2", "def truncate_number(number):\n    while True:\n        pass\n")
	if s.Passed || s.Class != "timeout" {
		t.Errorf("loop: class %s, output:\n%s", s.Class, s.Output)
	}
	s = scoreCode(t, "HumanEval/2", "def truncate_number(number):\n    return number % 1.0\nraise SystemExit(0)\n")
	if s.Passed || s.Class == "" {
		t.Errorf("exit: class %s, output:\n%s", s.Class, s.Output)
	}
}
