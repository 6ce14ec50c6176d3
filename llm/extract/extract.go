// Package extract pulls the program out of a model's answer.
//
// Models wrap code in Markdown fences of every shape: ```python, ```py,
// ```python3, a bare ```, ~~~ fences, fences indented inside a list item,
// CodeLlama's [PYTHON]...[/PYTHON], a fence never closed because the answer
// ended, or no fence at all. They add prose before and after, show a first
// attempt and then a corrected one, or follow the solution with an "example
// usage" block. Reasoning models think aloud in <think>...</think> first.
//
// Selection rule, applied by [Code]:
//
//  1. Line endings are normalised to \n and closed <think> sections are
//     dropped.
//  2. Fenced blocks are found. A block tagged with the target language (or
//     an alias: py, python3, js, node, sh, shell, ...) is a candidate. If
//     there is none, untagged blocks that look like the language are.
//     Blocks in other languages (a ```bash install line for a Python task,
//     a ```text output sample) are never chosen.
//  3. The answer is the LAST complete candidate: models put the final
//     version last. Earlier candidates are joined in front of it, nearest
//     first, while each one defines a name (def, class, function, variable)
//     that the blocks after it use and none that they redefine: so
//     "solution + example usage" or "helpers + main" come out whole, while
//     "first attempt + corrected version" yields the corrected one only.
//  4. With no complete candidate, a block whose closing fence is missing
//     (a cut-off answer, or a model that forgot it) is used; Result.Complete
//     is then false.
//  5. With no fence at all, the whole answer is the code if, after trimming
//     leading and trailing prose lines, it looks like the language.
//
// Otherwise [ErrNoCode] is returned.
package extract

import (
	"errors"
	"strings"

	"github.com/codeagent/codeagent/internal/lazyre"
)

// ErrNoCode means the answer holds no code in the wanted language.
var ErrNoCode = errors.New("extract: no code found in the answer")

// Source says where the code came from.
type Source string

// Sources of extracted code.
const (
	SourceFenced       Source = "fenced"       // one complete fenced block
	SourceJoined       Source = "joined"       // several blocks that belong together
	SourceUnterminated Source = "unterminated" // a fence that was never closed
	SourceBare         Source = "bare"         // no fence: the answer is the code
)

// Result is the extracted program.
type Result struct {
	Code     string // ends with exactly one newline
	Lang     string // the fence's tag as written, "" when untagged or bare
	Source   Source
	Blocks   int  // how many blocks were joined (0 for bare)
	Complete bool // false when the code came from an unterminated fence
}

// Block is one fenced block in an answer.
type Block struct {
	Lang     string // the tag, lower-cased ("" when none)
	Code     string // the body, de-indented by the fence's indentation
	Complete bool   // a closing fence was found
}

// languages maps a target language to the tags that mean it.
var languages = map[string][]string{
	"python":     {"python", "py", "python3", "py3", "python2", "ipython", "python-repl"},
	"javascript": {"javascript", "js", "node", "nodejs", "mjs", "cjs", "ecmascript"},
	"bash":       {"bash", "sh", "shell", "zsh", "shellscript", "shell-script"},
	"go":         {"go", "golang"},
}

// Normalize returns a canonical language name for lang or one of its
// aliases ("py" gives "python"), or "" when unknown.
func Normalize(lang string) string {
	lang = strings.ToLower(strings.TrimSpace(lang))
	for name, tags := range languages {
		if lang == name {
			return name
		}
		for _, t := range tags {
			if lang == t {
				return name
			}
		}
	}
	return ""
}

// Code extracts the program in lang ("python", "javascript", "bash", "go" or an
// alias) from answer, by the rule in the package comment.
func Code(answer, lang string) (Result, error) {
	target := Normalize(lang)
	if target == "" {
		return Result{}, errors.New("extract: unknown language " + lang)
	}
	text := clean(answer)
	blocks := Blocks(text)
	if len(blocks) == 0 {
		code := bare(text, target)
		if code == "" {
			return Result{}, ErrNoCode
		}
		return Result{Code: code, Source: SourceBare, Complete: true}, nil
	}
	var tagged, untagged []Block
	for _, b := range blocks {
		if strings.TrimSpace(b.Code) == "" {
			continue
		}
		switch {
		case Normalize(b.Lang) == target:
			tagged = append(tagged, b)
		case b.Lang == "" && looksLike(b.Code, target):
			untagged = append(untagged, b)
		}
	}
	cands := tagged
	if len(cands) == 0 {
		cands = untagged
	}
	var complete []Block
	for _, b := range cands {
		if b.Complete {
			complete = append(complete, b)
		}
	}
	if len(complete) == 0 {
		if len(cands) == 0 {
			return Result{}, ErrNoCode
		}
		b := cands[len(cands)-1]
		return Result{Code: finish(b.Code), Lang: b.Lang, Source: SourceUnterminated, Blocks: 1}, nil
	}
	chosen := join(complete, target)
	parts := make([]string, len(chosen))
	for i, b := range chosen {
		parts[i] = strings.TrimRight(b.Code, "\n ")
	}
	r := Result{Code: finish(strings.Join(parts, "\n\n")), Lang: chosen[len(chosen)-1].Lang,
		Source: SourceFenced, Blocks: len(chosen), Complete: true}
	if len(chosen) > 1 {
		r.Source = SourceJoined
	}
	return r, nil
}

// join picks the last block and the earlier ones that belong with it.
func join(blocks []Block, lang string) []Block {
	last := blocks[len(blocks)-1]
	chosen := []Block{last}
	defined := defs(last.Code, lang)
	used := last.Code
	for i := len(blocks) - 2; i >= 0; i-- {
		d := defs(blocks[i].Code, lang)
		if len(d) == 0 || overlaps(d, defined) || !usesAny(used, d) {
			break
		}
		chosen = append([]Block{blocks[i]}, chosen...)
		for k := range d {
			defined[k] = true
		}
		used += "\n" + blocks[i].Code
	}
	return chosen
}

var thinkRE = lazyre.New(`(?s)<think>.*?</think>`)

// clean normalises line endings and drops closed <think> sections.
func clean(s string) string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.ReplaceAll(s, "\r", "\n")
	s = strings.TrimPrefix(s, "\ufeff")
	return thinkRE.ReplaceAllString(s, "")
}

func finish(code string) string {
	return strings.TrimRight(code, "\n \t") + "\n"
}

var (
	fenceRE    = lazyre.New("^([ \t]*)(`{3,}|~{3,})[ \t]*([^`]*?)[ \t]*$")
	bracketRE  = lazyre.New(`^[ \t]*\[(PYTHON|JAVASCRIPT|BASH|SH|JS)\][ \t]*$`)
	tagCleanRE = lazyre.New(`^[{.]*([A-Za-z0-9_+#-]*)`)
)

// Blocks returns the fenced blocks of answer in order. A block's closing
// fence is the same character repeated at least as often, alone on its
// line; a block left open runs to the end of the answer.
func Blocks(answer string) []Block {
	lines := strings.Split(clean(answer), "\n")
	var out []Block
	for i := 0; i < len(lines); i++ {
		if m := bracketRE.FindStringSubmatch(lines[i]); m != nil {
			closing := "[/" + m[1] + "]"
			b := Block{Lang: strings.ToLower(m[1])}
			var body []string
			for i++; i < len(lines); i++ {
				if strings.TrimSpace(lines[i]) == closing {
					b.Complete = true
					break
				}
				body = append(body, lines[i])
			}
			b.Code = strings.Join(body, "\n")
			out = append(out, b)
			continue
		}
		m := fenceRE.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		indent, fence := len(m[1]), m[2]
		b := Block{Lang: strings.ToLower(tagCleanRE.FindStringSubmatch(m[3])[1])}
		// A fence line indented four columns more than the opening one,
		// or, in Python, inside a triple-quoted string (a docstring
		// showing Markdown) is the block's content; should no other fence
		// line come, the first one closes the block after all.
		python := b.Lang == "" || Normalize(b.Lang) == "python"
		var str byte
		start, end, firstClose := i+1, len(lines), -1
		for i = start; i < len(lines); i++ {
			if fenceOnly(lines[i], fence) {
				if closes(lines[i], indent) && (!python || str == 0) {
					end, b.Complete = i, true
					break
				}
				if firstClose < 0 {
					firstClose = i
				}
			}
			if python {
				str = pyStrings(lines[i], str)
			}
		}
		if !b.Complete && firstClose >= 0 {
			end, b.Complete, i = firstClose, true, firstClose
		}
		body := make([]string, 0, end-start)
		for _, l := range lines[start:end] {
			body = append(body, dedent(l, indent))
		}
		b.Code = strings.Join(body, "\n")
		out = append(out, b)
	}
	return out
}

// fenceOnly reports whether line holds only fence's character, repeated
// at least as often.
func fenceOnly(line, fence string) bool {
	t := strings.TrimSpace(line)
	return len(t) >= len(fence) && strings.Trim(t, fence[:1]) == ""
}

// closes reports whether a fence line may close a block opened at indent:
// it is indented at most three columns more (as in CommonMark).
func closes(line string, indent int) bool {
	return len(line)-len(strings.TrimLeft(line, " \t")) <= indent+3
}

// dedent removes up to n leading spaces or tabs.
func dedent(line string, n int) string {
	i := 0
	for i < n && i < len(line) && (line[i] == ' ' || line[i] == '\t') {
		i++
	}
	return line[i:]
}
