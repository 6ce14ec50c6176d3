package workspace

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"path"
	"regexp"
	"strings"
)

// A folder's ignore rules, as git reads them: each directory's .gitignore
// (deeper files and later lines win) and .git/info/exclude at the top. A
// change to a path they ignore is never offered: the user keeps such files
// out of review on purpose (builds, caches, data). The rules are read from
// the folder, never from the run's workspace, so a program cannot hide a
// change by writing a .gitignore.

// maxIgnoreFile bounds one ignore file read; a larger one is taken in
// part, as git would give up on no file.
const maxIgnoreFile = 1 << 20

// ignoreRule is one line of an ignore file.
type ignoreRule struct {
	re     *regexp.Regexp // matches a path relative to the file's directory
	negate bool
	dir    bool // matches directories only (a trailing slash)
}

// Ignorer answers whether paths of a folder are ignored, reading each
// directory's rules once, as they are asked for.
type Ignorer struct {
	root  *os.File
	rules map[string][]ignoreRule // directory (rel, "" the top) → its rules
}

// NewIgnorer reads the rules of the folder open as root (by descriptor,
// following no link).
func NewIgnorer(root *os.File) *Ignorer {
	ig := &Ignorer{root: root, rules: map[string][]ignoreRule{}}
	ig.rules[""] = append(ig.read(".git/info/exclude"), ig.read(".gitignore")...)
	return ig
}

// read parses the ignore file at rel of the folder; nothing when it
// cannot be read as a regular file.
func (ig *Ignorer) read(rel string) []ignoreRule {
	f, _, err := openRegular(ig.root, rel)
	if err != nil {
		return nil
	}
	defer f.Close()
	data, _ := io.ReadAll(io.LimitReader(f, maxIgnoreFile))
	var rules []ignoreRule
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), maxIgnoreFile)
	for sc.Scan() {
		if r, ok := parseIgnoreLine(sc.Text()); ok {
			rules = append(rules, r)
		}
	}
	return rules
}

// dirRules returns the rules of directory dir of the folder.
func (ig *Ignorer) dirRules(dir string) []ignoreRule {
	if r, ok := ig.rules[dir]; ok {
		return r
	}
	r := ig.read(path.Join(dir, ".gitignore"))
	ig.rules[dir] = r
	return r
}

// Ignored reports whether the entry at rel (a directory when dir) is
// ignored: by a rule of its own, or because a directory above it is.
func (ig *Ignorer) Ignored(rel string, dir bool) bool {
	parts := strings.Split(rel, "/")
	for i := 1; i < len(parts); i++ {
		if ig.match(strings.Join(parts[:i], "/"), true) {
			return true
		}
	}
	return ig.match(rel, dir)
}

// match applies the rules of every directory above rel, the deepest last,
// and returns the last verdict.
func (ig *Ignorer) match(rel string, dir bool) bool {
	ignored := false
	parts := strings.Split(rel, "/")
	for i := 0; i < len(parts); i++ {
		base := strings.Join(parts[:i], "/")
		sub := strings.Join(parts[i:], "/")
		for _, r := range ig.dirRules(base) {
			if r.dir && !dir {
				continue
			}
			if r.re.MatchString(sub) {
				ignored = !r.negate
			}
		}
	}
	return ignored
}

// parseIgnoreLine reads one line of an ignore file (gitignore(5)).
func parseIgnoreLine(line string) (ignoreRule, bool) {
	line = strings.TrimRight(line, "\r")
	// Trailing spaces go unless escaped with a backslash.
	for strings.HasSuffix(line, " ") && !strings.HasSuffix(line, "\\ ") {
		line = line[:len(line)-1]
	}
	if line == "" || strings.HasPrefix(line, "#") {
		return ignoreRule{}, false
	}
	var r ignoreRule
	if strings.HasPrefix(line, "!") {
		r.negate, line = true, line[1:]
	} else if strings.HasPrefix(line, "\\!") || strings.HasPrefix(line, "\\#") {
		line = line[1:]
	}
	if strings.HasSuffix(line, "/") {
		r.dir, line = true, strings.TrimRight(line, "/")
	}
	if line == "" {
		return ignoreRule{}, false
	}
	// A slash at the start or in the middle anchors the pattern to the
	// file's directory; otherwise it matches a name at any depth.
	anchored := strings.Contains(line, "/")
	line = strings.TrimPrefix(line, "/")
	expr := globToRegexp(line)
	if !anchored {
		expr = "(?:.*/)?" + expr
	}
	re, err := regexp.Compile("^" + expr + "$")
	if err != nil {
		return ignoreRule{}, false
	}
	r.re = re
	return r, true
}

// globToRegexp translates a gitignore glob: * and ? within a name, [...]
// classes, ** across directories, backslash escapes.
func globToRegexp(g string) string {
	var b strings.Builder
	for i := 0; i < len(g); i++ {
		c := g[i]
		switch {
		case c == '*' && strings.HasPrefix(g[i:], "**/"):
			b.WriteString("(?:.*/)?") // zero or more directories
			i += 2
		case c == '*' && strings.HasPrefix(g[i:], "**") && i+2 == len(g):
			b.WriteString(".*")
			i++
		case c == '*':
			b.WriteString("[^/]*")
		case c == '?':
			b.WriteString("[^/]")
		case c == '[':
			j := strings.IndexByte(g[i+1:], ']')
			if j < 0 {
				b.WriteString(`\[`)
				continue
			}
			class := g[i+1 : i+1+j]
			if strings.HasPrefix(class, "!") {
				class = "^" + class[1:]
			}
			b.WriteString("[" + strings.ReplaceAll(class, `\`, `\\`) + "]")
			i += j + 1
		case c == '\\' && i+1 < len(g):
			i++
			b.WriteString(regexp.QuoteMeta(string(g[i])))
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	return b.String()
}
