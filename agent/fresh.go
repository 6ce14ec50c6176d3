package agent

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/codeagent/codeagent/internal/lazyre"
)

// Bounds of what a fresh start remembers of earlier runs' output.
const (
	learnedRuns  = 3    // the last runs that succeeded
	learnedBytes = 1500 // of each one's output
)

// learned is the output of an attempt that ran without errors but did not
// complete the task: what the model found out (columns, values), for a
// fresh start.
type learned struct {
	N    int
	Text string
}

// learn remembers what a successful run of attempt n printed.
func (r *run) learn(n int, stdout []byte) {
	text := strings.TrimSpace(strings.ToValidUTF8(string(stdout), "\uFFFD"))
	if text == "" {
		return
	}
	r.learned = append(r.learned, learned{N: n, Text: Clip(text, learnedBytes*2/3, learnedBytes/3)})
	if len(r.learned) > learnedRuns {
		r.learned = r.learned[1:]
	}
}

// freshData is what fresh.txt is rendered with at attempt n: the task,
// what earlier runs printed, the names they found missing and their
// failures with the lines they failed at.
func (r *run) freshData(n int) map[string]any {
	d := r.taskData(n)
	d["Failures"], d["Outputs"] = r.failures, r.learned
	d["Missing"] = strings.Join(r.missing, ", ")
	return d
}

// Messages that name what a program looked for and did not find.
var (
	missingFile = lazyre.New(`(?:FileNotFoundError|No such file or directory)[^'"]*['"]([^'"]{1,200})['"]`)
	missingKey  = lazyre.New(`KeyError: ['"]([^'"]{1,200})['"]`)
)

// noteMissing records the file or key (column) a failed run's error names
// as not there, once.
func (r *run) noteMissing(stderr string) {
	var name string
	if m := missingFile.FindStringSubmatch(stderr); m != nil {
		name = fmt.Sprintf("the file %q", m[1])
	} else if m := missingKey.FindStringSubmatch(stderr); m != nil {
		name = fmt.Sprintf("the key or column %q", m[1])
	}
	if name == "" {
		return
	}
	for _, s := range r.missing {
		if s == name {
			return
		}
	}
	r.missing = append(r.missing, r.a.redact.String(name))
}

// failedLine finds the line of the program where a run failed, from its
// traceback (python), stack (node) or error message (bash), and returns
// it as " at line N: CODE", or "" when no line of the program is named.
func (r *run) failedLine(code, stderr string) string {
	file := regexp.QuoteMeta(r.a.SolutionFile())
	re := regexp.MustCompile(`(?:File "[^"]*` + file + `", line |` + file + `:(?: line )?)(\d+)`)
	all := re.FindAllStringSubmatch(stderr, -1)
	if len(all) == 0 {
		return ""
	}
	n, _ := strconv.Atoi(all[len(all)-1][1])
	lines := strings.Split(code, "\n")
	if n < 1 || n > len(lines) {
		return ""
	}
	return fmt.Sprintf(" at line %d: %s", n, cutRunes(strings.TrimSpace(lines[n-1]), 120))
}
