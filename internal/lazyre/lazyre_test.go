package lazyre

import "testing"

func TestCompiledOnFirstUse(t *testing.T) {
	r := New(`^a{0,3}b$`)
	if r.re != nil {
		t.Fatal("compiled before use")
	}
	if !r.MatchString("aab") || r.MatchString("aaaab") {
		t.Fatal("wrong matches")
	}
	if r.Get() != r.Get() {
		t.Fatal("compiled twice")
	}
}

func TestInvalidPanicsOnUse(t *testing.T) {
	r := New(`(`)
	defer func() {
		if recover() == nil {
			t.Fatal("an invalid pattern did not panic")
		}
	}()
	r.MatchString("x")
}
