package lang

import "github.com/codeagent/codeagent/internal/lazyre"

// namedIn are the words by which a task names a language: the language's
// name, a kind of script, or a program file's extension.
var namedIn = []struct {
	lang string
	re   *lazyre.Regexp
}{
	{"python", lazyre.New(`(?i)\bpython3?\b|\b[\w-]+\.py\b`)},
	{"javascript", lazyre.New(`(?i)\bjavascript\b|\bnode\.?js\b|\bjs\b|\b[\w-]+\.[mc]?js\b`)},
	{"bash", lazyre.New(`(?i)\bbash\b|\b(?:shell|sh) script\b|\b[\w-]+\.sh\b`)},
	// Go is also an English verb ("go through the list", "Go over the
	// rows"): the word counts only as a language's name, in a phrase
	// that names one ("a Go program", "in Go", "Go's"), with "golang",
	// "go run" or a file name such as main.go.
	{"go", lazyre.New(`(?i)\bgolang\b|\b[\w-]+\.go\b|\bgo (?:run|build)\b|\bgo (?:program|code|script|module|package|binary|source)s?\b|` +
		`(?-i:\b(?:in|using|with|into|to|idiomatic|modern|plain) Go\b|\bGo(?:'s)? (?:function|file|struct|type|version|standard|toolchain|CLI|command)s?\b|\bGo's\b)`)},
}

// FromTask returns the language a task asks for in its words: "a bash
// script", "in JavaScript", "with Node.js", "Python", "a Go program", or a
// program's file name such as "main.js". ok is false when it names none of the languages,
// or more than one (which to write is then the caller's default).
func FromTask(task string) (l Language, ok bool) {
	found := ""
	for _, n := range namedIn {
		if n.re.MatchString(task) {
			if found != "" {
				return Language{}, false
			}
			found = n.lang
		}
	}
	if found == "" {
		return Language{}, false
	}
	l, err := Lookup(found)
	return l, err == nil
}
