package safety

import (
	"slices"
	"testing"

	"github.com/codeagent/codeagent/lang"
)

// TestLanguagesAreLang: the checker knows exactly the languages package
// lang runs, by every name and extension lang accepts (MCP's check_code
// once refused "py", which execute_code took).
func TestLanguagesAreLang(t *testing.T) {
	var names []Language
	for _, l := range lang.All() {
		names = append(names, Language(l.Name))
		for _, n := range append([]string{l.Name, " " + l.Name + " "}, l.Aliases...) {
			if got, err := ParseLanguage(n); err != nil || got != Language(l.Name) {
				t.Errorf("ParseLanguage(%q) = %q, %v; want %s", n, got, err, l.Name)
			}
		}
		for _, e := range l.Extensions {
			if got, ok := LanguageForFile("x" + e); !ok || got != Language(l.Name) {
				t.Errorf("LanguageForFile(x%s) = %q, %v", e, got, ok)
			}
		}
	}
	if !slices.Equal(names, Languages()) {
		t.Errorf("safety.Languages() = %v, lang has %v", Languages(), names)
	}
	if _, err := ParseLanguage("cobol"); err == nil {
		t.Error("an unknown language was accepted")
	}
}
