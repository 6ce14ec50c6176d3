package sandboxtest

import (
	"regexp"
	"strings"
)

// runLine and failLine are the lines "go test -v" prints as a test starts,
// resumes or fails.
var (
	runLine  = regexp.MustCompile(`^\s*=== (?:RUN|CONT|PAUSE|NAME)\s+(\S+)`)
	failLine = regexp.MustCompile(`^\s*--- FAIL: (\S+)`)
)

// FailureSummary picks out of the verbose output of a test binary the
// tests that failed and the lines each of them logged, so that a failure in
// a child run (as another user, say) reads first in a cut CI log instead of
// being buried under thousands of passing lines. It returns "" when no test
// failed.
func FailureSummary(out string) string {
	logged := map[string][]string{}
	var current string
	var failed []string
	seen := map[string]bool{}
	for _, line := range strings.Split(out, "\n") {
		if m := runLine.FindStringSubmatch(line); m != nil {
			current = m[1]
			continue
		}
		if m := failLine.FindStringSubmatch(line); m != nil {
			if !seen[m[1]] {
				seen[m[1]] = true
				failed = append(failed, m[1])
			}
			continue
		}
		if current != "" && strings.TrimSpace(line) != "" && !strings.HasPrefix(strings.TrimSpace(line), "--- ") {
			logged[current] = append(logged[current], line)
		}
	}
	var b strings.Builder
	for _, name := range failed {
		// A parent fails with its child; say only the tests that logged.
		if len(logged[name]) == 0 {
			continue
		}
		b.WriteString("--- FAIL: " + name + "\n")
		lines := logged[name]
		if len(lines) > 40 {
			lines = append(lines[:20:20], append([]string{"    […]"}, lines[len(lines)-20:]...)...)
		}
		b.WriteString(strings.Join(lines, "\n") + "\n")
	}
	if b.Len() == 0 && len(failed) > 0 {
		b.WriteString("failed: " + strings.Join(failed, ", ") + "\n")
	}
	return b.String()
}
