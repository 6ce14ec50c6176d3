package agent

import (
	"embed"
	"fmt"
	"strings"
	"sync"
	"text/template"
	"unicode/utf8"

	"github.com/codeagent/codeagent/sandbox"
)

//go:embed prompts/*.txt
var promptFS embed.FS

// prompts are parsed once, on first use rather than at every start of the
// binary (0.6 ms); each file is a template named by its base name.
var prompts = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("").Option("missingkey=error").ParseFS(promptFS, "prompts/*.txt"))
})

// render executes the prompt file name with data.
func render(name string, data any) string {
	var b strings.Builder
	if err := prompts().ExecuteTemplate(&b, name, data); err != nil {
		panic(fmt.Sprintf("agent: prompt %s: %v", name, err)) // a bug in an embedded prompt
	}
	return b.String()
}

// DefaultOutputBudget is how much of a long output reaches the model: this
// many bytes of its head and as many of its tail.
const DefaultOutputBudget = 4096

// Clip returns s unchanged when it fits in head+tail bytes; otherwise its
// first head and last tail bytes (cut at line ends where one is near, and
// at character boundaries) around a line saying how much was left out.
func Clip(s string, head, tail int) string {
	if head < 0 {
		head = 0
	}
	if tail < 0 {
		tail = 0
	}
	if len(s) <= head+tail+64 { // never cut less than the marker costs
		return s
	}
	h := s[:head]
	if i := strings.LastIndexByte(h, '\n'); i >= head*3/4 {
		h = h[:i+1]
	}
	for i := 0; i < utf8.UTFMax-1 && len(h) > 0; i++ { // drop a rune cut in half
		if r, n := utf8.DecodeLastRuneInString(h); r != utf8.RuneError || n > 1 {
			break
		}
		h = h[:len(h)-1]
	}
	t := s[len(s)-tail:]
	if i := strings.IndexByte(t, '\n'); i >= 0 && i < tail/4 {
		t = t[i+1:]
	}
	for i := 0; i < utf8.UTFMax-1 && len(t) > 0 && !utf8.RuneStart(t[0]); i++ {
		t = t[1:]
	}
	cut := len(s) - len(h) - len(t)
	if !strings.HasSuffix(h, "\n") && h != "" {
		h += "\n"
	}
	return fmt.Sprintf("%s[... %d bytes cut ...]\n%s", h, cut, t)
}

// clip cuts output to the budget for the model.
func (r *run) clip(b []byte) string {
	return Clip(strings.ToValidUTF8(string(b), "\uFFFD"), r.a.cfg.OutputBudget, r.a.cfg.OutputBudget)
}

// numbered returns code with right-aligned line numbers, as tracebacks
// refer to them.
func numbered(code string) string {
	lines := strings.Split(strings.TrimSuffix(code, "\n"), "\n")
	w := len(fmt.Sprint(len(lines)))
	var b strings.Builder
	b.Grow(len(code) + len(lines)*(w+2))
	for i, l := range lines {
		fmt.Fprintf(&b, "%*d  %s\n", w, i+1, l)
	}
	return b.String()
}

// classHints tell the model where to look for each class of failure.
var classHints = map[ErrorClass]string{
	ClassSyntax:    "the code does not parse: check brackets, quotes, indentation and colons.",
	ClassName:      "a name is used before it is defined or imported: check spelling and imports.",
	ClassImport:    "only the standard library and the packages named at the start are installed.",
	ClassFile:      "use only the files listed in the working directory, by their exact relative names.",
	ClassValue:     "the data is not shaped as the code assumes: inspect the actual column names, keys and types (the listed first lines show them).",
	ClassAssertion: "compare what the tests expect with what the code returns, case by case.",
	ClassTimeout:   "the program ran out of time: look for a loop that never ends, or work that is far too slow.",
	ClassMemory:    "the program ran out of memory: process data in pieces and avoid building huge structures.",
	ClassRuntime:   "read the traceback from the bottom up to find the failing line.",
}

// lastLine is the last non-empty line of s, shortened, for summaries.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" {
			return cutRunes(l, 200)
		}
	}
	return ""
}

// cutRunes shortens s to n runes.
func cutRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "..."
}

// networkRefusals tells the model which hosts codeagent's egress proxy
// refused, and what the allow list is, or "" when it refused none.
func networkRefusals(e *sandbox.Egress) string {
	refused := e.JSON().RefusedHosts()
	if len(refused) == 0 {
		return ""
	}
	if len(refused) > 5 {
		refused = append(refused[:5], fmt.Sprintf("and %d more", len(refused)-5))
	}
	return fmt.Sprintf("The network refused %s; programs may reach only %s, through the proxy in HTTP_PROXY/HTTPS_PROXY.",
		strings.Join(refused, ", "), strings.Join(e.Allow, ", "))
}

// allowedHosts is the allow list for the system prompt, "" for none.
func allowedHosts(n *sandbox.Network) string {
	if n == nil {
		return ""
	}
	return strings.Join(n.Allow, ", ")
}
