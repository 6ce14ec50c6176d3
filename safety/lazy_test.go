package safety

import "testing"

func TestLazy(t *testing.T) {
	var l Lazy
	built := 0
	policy := func() (*Policy, error) { built++; return DefaultPolicy().WithNetwork(), nil }
	c1, err := l.Get(policy)
	if err != nil || c1 == nil {
		t.Fatalf("Get: %v %v", c1, err)
	}
	if c2, _ := l.Get(policy); c2 != c1 || built != 1 {
		t.Fatalf("a second checker, or the policy built %d times", built)
	}
	l.Close()
	if c, err := l.Get(policy); c != nil || err == nil {
		t.Fatalf("after Close: %v %v", c, err)
	}
}
