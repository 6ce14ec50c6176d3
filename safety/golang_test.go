package safety

import "testing"

// TestGoSyntaxError: Go that does not parse is a syntax-error finding at
// the error's line, as in the other languages.
func TestGoSyntaxError(t *testing.T) {
	c := newTestChecker(t)
	r := check(t, c, Go, "package main\n\nfunc main() { fmt.Println(\"x\" }\n")
	if !hasRule(r, RuleSyntaxError) || r.Findings[0].Line != 3 {
		t.Fatalf("findings = %v, want a syntax error at line 3", r.Findings)
	}
	if r := check(t, c, Go, "fmt.Println(1)\n"); !hasRule(r, RuleSyntaxError) {
		t.Fatalf("a file without a package clause: %v", r.Findings)
	}
}

// TestGoAllowMode: in allow mode only the listed packages (a pattern
// ending in /... covers those below) may be imported.
func TestGoAllowMode(t *testing.T) {
	p, err := ParsePolicy([]byte("mode: allow\ngo: {allowed_packages: [fmt, encoding/...]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(p)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ok := "package main\n\nimport (\n\t\"encoding/json\"\n\t\"fmt\"\n)\n\nfunc main() { fmt.Println(json.Valid(nil)) }\n"
	if r := check(t, c, Go, ok); !r.Safe() {
		t.Errorf("allowed packages: %v", r.Findings)
	}
	if r := check(t, c, Go, "package main\n\nimport \"strings\"\n\nfunc main() { _ = strings.ToUpper }\n"); !hasRule(r, RuleImportNotAllowed) {
		t.Errorf("strings is not allowed: %v", r.Findings)
	}
	if _, err := ParsePolicy([]byte("go: {forbidden_packages: [\"a b\"], forbidden_functions: [os]}\n")); err == nil {
		t.Error("an invalid Go policy was accepted")
	}
}
