package workspace

import (
	"fmt"
	"io"
	"os"
	"strings"
	"unicode/utf8"

	udiff "github.com/aymanbagabas/go-udiff"

	"github.com/codeagent/codeagent/sandbox"
)

// maxDiffFile bounds a file Diff shows as text.
const maxDiffFile = 1 << 20

// Diff is a unified diff of the text files among changes, between the
// folder dir and the directory src with the new contents; a binary or
// large file gets one line saying it differs.
func Diff(dir, src string, changes []Change) (string, error) {
	folder, err := sandbox.OpenWorkspace(dir)
	if err != nil {
		return "", fmt.Errorf("folder %s: %w", dir, err)
	}
	defer folder.Close()
	from, err := sandbox.OpenWorkspace(src)
	if err != nil {
		return "", fmt.Errorf("changes %s: %w", src, err)
	}
	defer from.Close()
	var b strings.Builder
	for _, c := range changes {
		oldLabel, newLabel := "a/"+c.Path, "b/"+c.Path
		var old, cur string
		var okOld, okNew = true, true
		if c.Kind != ChangeAdded {
			old, okOld = readText(folder, c.Path)
		} else {
			oldLabel = "/dev/null"
		}
		if c.Kind != ChangeDeleted {
			cur, okNew = readText(from, c.Path)
		} else {
			newLabel = "/dev/null"
		}
		if !okOld || !okNew {
			fmt.Fprintf(&b, "Binary files %s and %s differ\n", oldLabel, newLabel)
			continue
		}
		b.WriteString(udiff.Unified(oldLabel, newLabel, old, cur))
	}
	return b.String(), nil
}

// readText reads rel beneath d as text: false for a file that is large,
// not UTF-8 or holds NUL bytes.
func readText(d *os.File, rel string) (string, bool) {
	f, fi, err := openRegular(d, rel)
	if err != nil {
		return "", false
	}
	defer f.Close()
	if fi.Size() > maxDiffFile {
		return "", false
	}
	data, err := io.ReadAll(io.LimitReader(f, maxDiffFile+1))
	if err != nil || len(data) > maxDiffFile || !utf8.Valid(data) || strings.ContainsRune(string(data), 0) {
		return "", false
	}
	return string(data), true
}
