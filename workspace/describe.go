package workspace

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/codeagent/codeagent/sandbox"
)

// Describe options: how many files are listed, how many first lines of each
// CSV/JSON file are shown and how long each line may be.
const (
	describeFiles    = 50
	describeLines    = 5
	describeLineLen  = 200
	describeReadSize = 4096
)

// peekExts are the files whose first lines the model sees.
var peekExts = map[string]bool{".csv": true, ".tsv": true, ".json": true, ".jsonl": true, ".ndjson": true}

// Describe lists the workspace's regular files with their sizes, and the
// first lines of CSV and JSON files, for the model's prompt. exclude, when
// non-nil, drops paths such as the agent's own files. It returns "" for an
// empty workspace.
func (w *Workspace) Describe(exclude func(rel string) bool) string {
	snap, err := w.Snapshot(Limits{MaxEntries: 2000})
	if err != nil {
		return ""
	}
	paths := make([]string, 0, len(snap.Files))
	for p := range snap.Files {
		if exclude == nil || !exclude(p) {
			paths = append(paths, p)
		}
	}
	if len(paths) == 0 {
		return ""
	}
	sort.Strings(paths)
	root, err := sandbox.OpenWorkspace(w.Dir)
	if err != nil {
		return ""
	}
	defer root.Close()
	var b strings.Builder
	for i, p := range paths {
		if i == describeFiles {
			fmt.Fprintf(&b, "- ... and %d more files\n", len(paths)-i)
			break
		}
		fmt.Fprintf(&b, "- %s (%d bytes)\n", p, snap.Files[p].Size)
		if dot := strings.LastIndexByte(p, '.'); dot >= 0 && peekExts[strings.ToLower(p[dot:])] {
			for _, line := range firstLines(root, p) {
				b.WriteString("    | " + line + "\n")
			}
		}
	}
	return b.String()
}

// firstLines reads the start of rel and returns up to describeLines lines,
// each cut to describeLineLen characters.
func firstLines(root *os.File, rel string) []string {
	f, _, err := openRegular(root, rel)
	if err != nil {
		return nil
	}
	defer f.Close()
	buf := make([]byte, describeReadSize)
	n, _ := io.ReadFull(f, buf)
	text := strings.ToValidUTF8(string(buf[:n]), "?")
	lines := strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n")
	if n == len(buf) && len(lines) > 1 {
		lines = lines[:len(lines)-1] // the last line may be cut mid-way
	}
	var out []string
	for _, l := range lines {
		if len(out) == describeLines {
			break
		}
		if l == "" && len(out) == 0 {
			continue
		}
		out = append(out, cut(l, describeLineLen))
	}
	for len(out) > 0 && out[len(out)-1] == "" {
		out = out[:len(out)-1]
	}
	return out
}

// cut shortens s to at most n runes, marking the cut.
func cut(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n]) + "..."
}
