package safety

import (
	"bytes"
	"runtime"
	"unicode/utf8"
)

// Parallel parsing of large Python files.
//
// tree-sitter parses one input on one thread, and parsing is about 85% of a
// check. A Python module is a plain sequence of statements, and a line that
// starts at column 0 outside any bracket, string or line continuation starts
// a new top-level statement with the tokenizer back in its initial state
// (no open indentation, brackets or strings). Parsing the pieces between such
// lines separately and appending their trees in order (tsparse.AppendTree)
// therefore gives the same tree as parsing the whole file, and the pieces
// can be parsed on several CPUs (parserPool.parseCut).
//
// Correctness rests on two checks, not on the lexical scan: every cut must
// pass cutOK (column 0, a name that does not continue a compound statement,
// no backslash continuation on the line before), and parseCut parses the
// whole file instead when a piece has an ERROR or MISSING node. A cut inside
// a string, bracket or f-string field leaves its first piece unterminated,
// which tree-sitter reports as an error. TestSplitSafetyNet and
// FuzzSplitParse check that any cut cutOK accepts gives the whole-file tree;
// TestSplitParseMatchesWhole and TestSplitFindingsMatchWhole compare trees
// and findings over the corpora, HumanEval and the bench file.
//
// pyCuts picks the cuts with a cheap lexical scan that follows
// tree-sitter-python's tokenizer (string prefixes, raw and bytes escapes,
// nested f-string fields and format specs, comments, brackets,
// continuations), so that its cuts are at the top level and rarely need the
// fallback, and that balances the pieces by an estimate of the parse cost
// (tokens rather than bytes: comments and docstrings parse fast).

const (
	// splitMinBytes is the smallest input that is parsed in pieces.
	splitMinBytes = 4 << 10
	// splitMinPiece is the smallest piece worth its own thread.
	splitMinPiece = 2 << 10
	// splitMaxPieces bounds the pieces of one file.
	splitMaxPieces = 8
)

// splitPieces returns how many pieces an input of n bytes is parsed in.
func splitPieces(n int) int {
	if n < splitMinBytes {
		return 1
	}
	return max(1, min(runtime.GOMAXPROCS(0), n/splitMinPiece, splitMaxPieces))
}

// pySplit returns where to cut code for a parallel parse, or nil to parse it
// whole.
func pySplit(code []byte) []int {
	k := splitPieces(len(code))
	if k < 2 {
		return nil
	}
	return pyCuts(code, k)
}

// pyFrame is one level of the scanner's nesting: code (quote == 0 and not
// spec), a string literal, or the format spec of an f-string field.
type pyFrame struct {
	quote  byte // the string's closing quote character; 0 for code and specs
	triple bool // a triple-quoted string
	fstr   bool // an f-string: '{' opens a field
	raw    bool // a raw string
	bytes  bool // a bytes string
	spec   bool // a format spec: '{' opens a field, '}' ends the field
	depth  int  // code: open brackets
}

// pyCuts returns up to k-1 increasing byte offsets, each near j*len/k, at
// which code can be cut into pieces that each start with a top-level
// statement. It returns nil when the file should be parsed whole: the scan
// found no suitable line, or the file does not tokenize cleanly (unbalanced
// brackets, unterminated strings, NUL bytes or invalid UTF-8), in which case
// the whole parse reports the error anyway.
//
// The scan follows tree-sitter-python's external scanner and string rules
// (prefix flags, raw and bytes escapes, \N{...}, nested f-string fields and
// format specs, backtick strings), so that it agrees with the parser on
// where strings, brackets and continuations are.
func pyCuts(code []byte, k int) []int {
	if k < 2 || !utf8.Valid(code) {
		return nil
	}
	var cs cutScan
	if !cs.scan(code) || cs.n == 0 {
		return nil
	}
	// Cut where the estimated parse cost (tokens) reaches j/k of the total.
	cands := cs.cands[:cs.n]
	cuts := make([]int, 0, k-1)
	c := 0
	for j := 1; j < k; j++ {
		target := cs.cost * j / k
		for c+1 < len(cands) && cands[c+1].cost <= target {
			c++
		}
		best := c
		if c+1 < len(cands) && cands[c+1].cost-target < target-cands[c].cost {
			best = c + 1
		}
		if p := cands[best].pos; len(cuts) == 0 || p > cuts[len(cuts)-1] {
			cuts = append(cuts, p)
		}
	}
	return cuts
}

// cutCand is a line where the file can be cut, with the estimated parse
// cost of the text before it.
type cutCand struct{ pos, cost int }

// cutScan is the state of pyCuts' lexical scan.
type cutScan struct {
	cost  int // tokens so far, a proxy for parse time
	cands [256]cutCand
	n     int // candidates in cands
	gap   int // record a candidate only this much cost after the last one
	// each, when set, is called with every candidate (for tests).
	each func(pos int)
}

func (cs *cutScan) add(pos int) {
	if cs.each != nil {
		cs.each(pos)
	}
	if cs.n > 0 && cs.cost-cs.cands[cs.n-1].cost < cs.gap {
		return
	}
	if cs.n == len(cs.cands) {
		// Keep every other candidate, and space new ones further apart, so
		// the scan needs no memory that grows with the file.
		for i := 0; i < cs.n/2; i++ {
			cs.cands[i] = cs.cands[2*i+1]
		}
		cs.n /= 2
		cs.gap = max(1, 2*(cs.cost-cs.cands[0].cost)/len(cs.cands))
		if cs.cost-cs.cands[cs.n-1].cost < cs.gap {
			return
		}
	}
	cs.cands[cs.n] = cutCand{pos, cs.cost}
	cs.n++
}

// Byte classes of the scan's code mode.
const (
	clOther = iota // operators and other punctuation: one token each
	clSpace
	clIdent // letters, digits, '_' and non-ASCII: a run is one token
	clSpecial
)

var pyClass = func() (t [256]uint8) {
	for b := range 256 {
		switch {
		case b >= 0x80 || isIdentByte(byte(b)):
			t[b] = clIdent
		case b == ' ' || b == '\t' || b == '\f' || b == '\r':
			t[b] = clSpace
		}
	}
	for _, b := range []byte("#\\'\"`()[]{}:\n\x00") {
		t[b] = clSpecial
	}
	return t
}()

// pyPlain marks the bytes that mean nothing special inside a string.
var pyPlain = func() (t [256]bool) {
	for b := range 256 {
		t[b] = true
	}
	for _, b := range []byte("\\'\"`{}\n\r\x00") {
		t[b] = false
	}
	return t
}()

// scan reads code, recording candidate cuts, and reports whether code
// tokenizes cleanly.
func (cs *cutScan) scan(code []byte) bool {
	n := len(code)
	var stackBuf [16]pyFrame
	stack := append(stackBuf[:0], pyFrame{})
	decorator := n > 0 && code[0] == '@' // the last top-level line began with '@'
	for i := 0; i < n; {
		c := code[i]
		top := &stack[len(stack)-1]
		if top.quote == 0 && !top.spec {
			// Code: skip to the next byte that matters.
			cost := cs.cost
			for {
				cl := pyClass[c]
				if cl == clSpecial {
					break
				}
				i++
				if cl != clSpace {
					cost++
					if cl == clIdent {
						for i < n && pyClass[code[i]] == clIdent {
							i++
						}
					}
				}
				if i >= n {
					break
				}
				c = code[i]
			}
			cs.cost = cost + 1
			if i >= n {
				break
			}
			bottom := len(stack) == 1
			switch c {
			case 0:
				return false
			case '#':
				if j := bytes.IndexByte(code[i:], '\n'); j >= 0 {
					i += j
				} else {
					i = n
				}
				continue
			case '\\':
				// A line continuation (anything else is a syntax error).
				i++
				if i < n && code[i] == '\r' {
					i++
				}
				if i < n && code[i] == '\n' {
					i++
				}
				continue
			case '\'', '"', '`':
				cs.cost++
				fr := stringFlags(code, i)
				fr.quote = c
				if c != '`' && i+2 < n && code[i+1] == c && code[i+2] == c {
					fr.triple = true
					i += 2
				}
				stack = append(stack, fr)
			case '(', '[', '{':
				top.depth++
			case ')', ']':
				if top.depth--; top.depth < 0 {
					return false
				}
			case '}':
				if top.depth == 0 && !bottom {
					stack = stack[:len(stack)-1] // ends an f-string field
				} else if top.depth--; top.depth < 0 {
					return false
				}
			case ':':
				if top.depth == 0 && !bottom && !(i+1 < n && code[i+1] == '=') {
					stack = append(stack, pyFrame{spec: true})
				}
			case '\n':
				i++
				if !bottom || top.depth != 0 || i >= n {
					continue
				}
				// A new line at the top level.
				switch b := code[i]; {
				case b == '@':
					decorator = true
				case isIdentStart(b):
					if !decorator && cutOK(code, i) {
						cs.add(i)
					}
					decorator = false
				}
				continue
			}
			i++
			continue
		}
		if c == 0 {
			return false
		}
		if top.spec {
			// A format spec: /[^{}\n]+/ and nested fields.
			switch c {
			case '{':
				cs.cost++
				stack = append(stack, pyFrame{})
			case '}':
				cs.cost++
				stack = stack[:len(stack)-2] // the spec and its field
			case '\n', '\r':
				return false
			}
			i++
			continue
		}
		// A string literal: skip plain text.
		for pyPlain[c] {
			if i++; i >= n {
				return false
			}
			c = code[i]
		}
		switch {
		case c == '\\':
			cs.cost++
			i = skipEscape(code, i, top)
			continue
		case top.fstr && (c == '{' || c == '}'):
			cs.cost++
			if i+1 < n && code[i+1] == c {
				i += 2 // {{ or }}
				continue
			}
			if c == '{' {
				stack = append(stack, pyFrame{})
			}
		case c == top.quote:
			if !top.triple {
				stack = stack[:len(stack)-1]
			} else if i+2 < n && code[i+1] == c && code[i+2] == c {
				stack = stack[:len(stack)-1]
				i += 3
				continue
			}
		case (c == '\n' || c == '\r') && !top.triple:
			return false // an unterminated string
		}
		i++
	}
	return len(stack) == 1 && stack[0].depth == 0
}

// skipEscape returns the index after the backslash at i in string s, as
// tree-sitter-python's scanner and escape_sequence token read it.
func skipEscape(code []byte, i int, s *pyFrame) int {
	n := len(code)
	i++ // the backslash
	if i >= n {
		return i
	}
	c := code[i]
	if s.raw {
		if c == s.quote || c == '\\' {
			i++
		}
		if i < n && code[i] == '\r' {
			i++
		}
		if i < n && code[i] == '\n' {
			i++
		}
		return i
	}
	switch c {
	case '\'', '"', '\\', '\n':
		return i + 1
	case '\r':
		if i+1 < n && code[i+1] == '\n' {
			return i + 2
		}
	case 'N':
		if s.bytes {
			return i + 1
		}
		// \N{NAME}: /N\{[^}]+\}/
		if i+2 < n && code[i+1] == '{' && code[i+2] != '}' {
			for j := i + 2; j < n; j++ {
				if code[j] == '}' {
					return j + 1
				}
			}
		}
	}
	// Any other character is read normally after the backslash.
	return i
}

func isIdentStart(b byte) bool { return b == '_' || b|0x20 >= 'a' && b|0x20 <= 'z' }

func isIdentByte(b byte) bool { return isIdentStart(b) || b >= '0' && b <= '9' || b >= 0x80 }

// stringFlags returns the flags of a string whose quote is at i: the word
// right before the quote is its prefix when it consists only of the letters
// tree-sitter-python's scanner takes as flags (fFrRbBuU); otherwise the word
// is a name and the string has no flags.
func stringFlags(code []byte, i int) pyFrame {
	j := i
	for j > 0 && isIdentByte(code[j-1]) {
		j--
	}
	var fr pyFrame
	for _, b := range code[j:i] {
		switch b {
		case 'f', 'F':
			fr.fstr = true
		case 'r', 'R':
			fr.raw = true
		case 'b', 'B':
			fr.bytes = true
		case 'u', 'U':
		default:
			return pyFrame{}
		}
	}
	return fr
}

// cutOK checks, from the bytes around it alone, a cut at p that the scan
// found at the top level: the line at p starts with a name at column 0 that
// does not continue a compound statement (else, elif, except, finally), and
// the line before it does not end with a backslash. With these, and no
// syntax error in either piece, the pieces' trees append to the whole tree
// even where the scan misjudged a string or bracket (an unterminated string
// or bracket is a syntax error in its piece); TestSplitSafetyNet and
// FuzzSplitParse check this without the scan.
func cutOK(code []byte, p int) bool {
	if p <= 0 || p >= len(code) || code[p-1] != '\n' || !isIdentStart(code[p]) || continuesStatement(code[p:]) {
		return false
	}
	j := p - 1
	for j > 0 {
		switch code[j-1] {
		case ' ', '\t', '\f', '\r':
			j--
			continue
		}
		break
	}
	return j == 0 || code[j-1] != '\\'
}

// continuesStatement reports whether a line starts with a keyword that
// continues the compound statement before it.
func continuesStatement(line []byte) bool {
	j := 0
	for j < len(line) && isIdentByte(line[j]) {
		j++
	}
	switch string(line[:j]) {
	case "else", "elif", "except", "finally":
		return true
	}
	return false
}
