package extract

import (
	"strings"

	"github.com/codeagent/codeagent/internal/lazyre"
)

// Heuristics for answers that do not say their language: which language a
// snippet looks like, which top-level names it defines, and which lines
// are prose. They are deliberately simple and err towards "not code".

var signs = map[string]*lazyre.Regexp{
	"python":     lazyre.New(`^(#!.*python|\s*(def \w+\s*\(|async def |class \w+[(:]|import \w|from [\w.]+ import |print\(|if __name__|elif .+:\s*$|else:\s*$|try:\s*$|except\b.*:\s*$|for .+ in .+:\s*$|while .+:\s*$|with .+:\s*$|return\b|@\w+|[A-Za-z_]\w*(\s*,\s*\w+)*\s+=\s+\S|[A-Za-z_][\w.]*\(.*\)\s*$))`),
	"javascript": lazyre.New(`^(#!.*node|\s*(function\b|async function\b|const |let |var |console\.\w+\(|import .* from ['"]|export |module\.exports|.*\brequire\(['"]|.*=>\s*\{?\s*$|\}\)?;?\s*$|.*;\s*$))`),
	"go":         lazyre.New(`^(\s*(package \w+\s*$|import \(|import "|func \w*\s*\(|func \(\w+ \*?\w+\)|type \w+ (struct|interface)\b|\w+(, \w+)* := |fmt\.\w+\(|var \w+ \w+|defer |go func\b|for .* := range |if err != nil))`),
	"bash":       lazyre.New(`^(#!.*\b(ba|z)?sh\b|\s*(echo |printf |set -[euxo]|if \[|fi\s*$|done\s*$|esac\s*$|for \w+ in .*; do|while .*; do|\w+=("|'|\$|\S+$)|export \w+=|cd |mkdir |ls\b|grep |sed |awk |cat |read -r))`),
}

// score counts the lines of code that look like lang.
func score(code, lang string) int {
	n := 0
	for _, l := range strings.Split(code, "\n") {
		if signs[lang].MatchString(l) {
			n++
		}
	}
	return n
}

// looksLike reports whether code looks more like lang than like the other
// known languages.
func looksLike(code, lang string) bool {
	s := score(code, lang)
	if s == 0 {
		return false
	}
	for other := range signs {
		if other != lang && score(code, other) > s {
			return false
		}
	}
	return true
}

var (
	pyDefRE  = lazyre.New(`^(?:async\s+)?(?:def|class)\s+([A-Za-z_]\w*)|^([A-Za-z_]\w*)\s*(?::[^=]+)?=[^=]`)
	pyImpRE  = lazyre.New(`^(?:from\s+\S+\s+)?import\s+(.+)$`)
	jsDefRE  = lazyre.New(`^(?:export\s+(?:default\s+)?)?(?:(?:async\s+)?function\s*\*?\s*([A-Za-z_$][\w$]*)|class\s+([A-Za-z_$][\w$]*)|(?:const|let|var)\s+([A-Za-z_$][\w$]*))`)
	goDefRE  = lazyre.New(`^(?:func\s+([A-Za-z_]\w*)|type\s+([A-Za-z_]\w*)|(?:var|const)\s+([A-Za-z_]\w*))`)
	shDefRE  = lazyre.New(`^(?:function\s+([A-Za-z_][\w-]*)|([A-Za-z_][\w-]*)\s*\(\)\s*\{?|([A-Za-z_]\w*)=)`)
	aliasRE  = lazyre.New(`(?:^|,)\s*([\w.]+)(?:\s+as\s+(\w+))?`)
	identsRE = lazyre.New(`[A-Za-z_$][\w$]*`)
)

// defs returns the top-level names code defines. A true value marks a
// definition proper (function, class, variable); false marks an import,
// which may repeat between blocks without meaning "redefined".
func defs(code, lang string) map[string]bool {
	out := map[string]bool{}
	for _, l := range strings.Split(code, "\n") {
		if l == "" || l[0] == ' ' || l[0] == '\t' {
			continue
		}
		var m []string
		switch lang {
		case "python":
			if im := pyImpRE.FindStringSubmatch(l); im != nil {
				for _, a := range aliasRE.FindAllStringSubmatch(strings.Trim(im[1], "()"), -1) {
					name := a[2]
					if name == "" {
						name = strings.Split(a[1], ".")[0]
					}
					if _, ok := out[name]; !ok {
						out[name] = false
					}
				}
				continue
			}
			m = pyDefRE.FindStringSubmatch(l)
		case "javascript":
			m = jsDefRE.FindStringSubmatch(l)
		case "bash":
			m = shDefRE.FindStringSubmatch(l)
		case "go":
			m = goDefRE.FindStringSubmatch(l)
		}
		for _, name := range m[min(1, len(m)):] {
			if name != "" {
				out[name] = true
			}
		}
	}
	return out
}

// overlaps reports whether a and b both define (not import) a name.
func overlaps(a, b map[string]bool) bool {
	for k, strong := range a {
		if strong && b[k] {
			return true
		}
	}
	return false
}

// usesAny reports whether code mentions any name in names.
func usesAny(code string, names map[string]bool) bool {
	for _, id := range identsRE.FindAllString(code, -1) {
		if _, ok := names[id]; ok {
			return true
		}
	}
	return false
}

// keywords start code lines, never prose.
var keywords = func() map[string]bool {
	m := map[string]bool{}
	for _, k := range strings.Fields(`and as assert async await break class continue def del elif else except
		finally for from global if import in is lambda nonlocal not or pass print raise return try while with yield
		True False None const let var function new this typeof switch case default do export require console
		echo export set cd fi done then esac local readonly unset source shift exit`) {
		m[k] = true
	}
	return m
}()

var proseRE = lazyre.New(`^[A-Za-z][A-Za-z']*[,!.:]?( +[^ =(){}\[\];]+){2,}[ ]*$`)

// isProse reports a line of English: it starts at column 0 with a word
// that is no keyword, has three or more words, and none of the brackets,
// '=' or ';' that code lines carry.
func isProse(line string) bool {
	if !proseRE.MatchString(line) {
		return false
	}
	first := strings.TrimRight(strings.Fields(line)[0], ",!.:")
	return !keywords[first]
}

// pyStrings returns the triple-quoted string state at the end of line
// given the state at its start: 0 outside a string, else the quote
// character of the open triple-quoted string. Comments and one-line strings
// are skipped; it is a line scanner, not a tokenizer.
func pyStrings(line string, state byte) byte {
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case state != 0:
			if c == '\\' {
				i++
			} else if c == state && strings.HasPrefix(line[i:], strings.Repeat(string(c), 3)) {
				state, i = 0, i+2
			}
		case c == '#':
			return 0
		case c == '"' || c == '\'':
			if strings.HasPrefix(line[i:], strings.Repeat(string(c), 3)) {
				state, i = c, i+2
				continue
			}
			for i++; i < len(line) && line[i] != c; i++ {
				if line[i] == '\\' {
					i++
				}
			}
		}
	}
	return state
}

// bare returns the code of an answer without fences: the answer minus
// leading and trailing prose lines, when the rest has no prose and looks
// like lang; else "". In Python, lines inside a triple-quoted string are
// never prose.
func bare(text, lang string) string {
	lines := strings.Split(text, "\n")
	inString := make([]bool, len(lines))
	if lang == "python" {
		var str byte
		for i, l := range lines {
			inString[i] = str != 0
			str = pyStrings(l, str)
		}
	}
	prose := func(i int) bool { return !inString[i] && isProse(lines[i]) }
	lo, hi := 0, len(lines)
	for lo < hi && (strings.TrimSpace(lines[lo]) == "" || prose(lo)) {
		lo++
	}
	for hi > lo && (strings.TrimSpace(lines[hi-1]) == "" || prose(hi-1)) {
		hi--
	}
	if lo == hi {
		return ""
	}
	body := lines[lo:hi]
	for i := lo; i < hi; i++ {
		if prose(i) {
			return ""
		}
	}
	code := strings.Join(body, "\n")
	if !looksLike(code, lang) {
		return ""
	}
	return finish(code)
}
