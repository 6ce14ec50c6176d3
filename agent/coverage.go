package agent

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Coverage is how much of the solution file the tests ran: statement
// coverage, measured in the same sandbox run as the tests (coverage.py
// for Python, go test's cover profile for Go).
type Coverage struct {
	// Percent of the solution's statements that the tests ran.
	Percent    float64 `json:"percent"`
	Statements int     `json:"statements"`
	Covered    int     `json:"covered"`
	// MissedLines are the lines of the statements never run, in order.
	MissedLines []int `json:"missed_lines"`
	// Unavailable says why coverage was not measured (the sandbox has no
	// coverage module, the report was lost); the other fields are zero.
	Unavailable string `json:"unavailable,omitempty"`
}

// String is the human form: "83% (lines 12-15 not run)", "100%", or
// "unavailable: ...".
func (c *Coverage) String() string {
	if c.Unavailable != "" {
		return "unavailable: " + c.Unavailable
	}
	s := formatPercent(c.Percent)
	if len(c.MissedLines) > 0 {
		s += " (" + linesPhrase(c.MissedLines) + " not run)"
	}
	return s
}

// formatPercent rounds to a whole percent, except that only full coverage
// shows as 100% and only none as 0%.
func formatPercent(p float64) string {
	r := math.Round(p)
	switch {
	case r == 100 && p < 100:
		r = 99
	case r == 0 && p > 0:
		r = 1
	}
	return strconv.Itoa(int(r)) + "%"
}

// linesPhrase names lines with contiguous runs as ranges: "line 4",
// "lines 12-15, 20".
func linesPhrase(lines []int) string {
	var parts []string
	for i := 0; i < len(lines); {
		j := i
		for j+1 < len(lines) && lines[j+1] == lines[j]+1 {
			j++
		}
		if j == i {
			parts = append(parts, strconv.Itoa(lines[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", lines[i], lines[j]))
		}
		i = j + 1
	}
	word := "lines "
	if len(lines) == 1 {
		word = "line "
	}
	return word + strings.Join(parts, ", ")
}

// neverRun is the feedback sentence for missed lines: "lines 12-15 are
// never run by the tests".
func neverRun(lines []int) string {
	verb := " are"
	if len(lines) == 1 {
		verb = " is"
	}
	return linesPhrase(lines) + verb + " never run by the tests"
}

// pythonCoverageScript runs pytest (its arguments after the solution's
// name and the marker) under coverage.py, measuring the solution file
// only, without a data file or a configuration file, and prints the
// solution's statements and missed lines as JSON after the marker, last
// on stdout. The `if __name__ == "__main__":` block is left out: the
// tests import the program, its main work runs when the program itself
// does. Without the coverage module the tests still run and the report
// says so.
const pythonCoverageScript = `import json, os, sys
src, marker, args = os.path.abspath(sys.argv[1]), sys.argv[2], sys.argv[3:]
try:
    import coverage
except ImportError:
    coverage = None
import pytest
report = {"unavailable": "the sandbox has no coverage module (python3-coverage)"}
cov = None
if coverage is not None:
    cov = coverage.Coverage(data_file=None, config_file=False, include=[src])
    cov.exclude(r"if\s+__name__\s*==\s*['\"]__main__['\"]\s*:")
    cov.start()
try:
    rc = pytest.main(args)
finally:
    if cov is not None:
        cov.stop()
if cov is not None:
    try:
        _, statements, _, missing, _ = cov.analysis2(src)
        report = {"statements": len(statements), "missing": sorted(missing)}
    except Exception as e:
        report = {"unavailable": "coverage could not read %s: %s" % (sys.argv[1], e)}
sys.stdout.flush()
sys.stdout.write("\n" + marker + json.dumps(report) + "\n")
sys.stdout.flush()
sys.exit(int(rc))
`

// pythonCoverage is the Python runner's command under coverage, with a
// fresh marker, so that a program cannot guess it in advance.
func pythonCoverage(solution string) ([]string, string) {
	marker := newMarker() + " "
	return append([]string{"python3", "-c", pythonCoverageScript, solution, marker}, pytestArgs...), marker
}

// newMarker is a fresh marker of a coverage report on stdout, so that a
// program cannot guess it in advance.
func newMarker() string {
	nonce := make([]byte, 8)
	rand.Read(nonce)
	return "@@codeagent-coverage-" + hex.EncodeToString(nonce) + "@@"
}

// readCoverage takes the report after marker out of stdout and returns
// the rest, as the tests printed it, with the coverage it reports (the
// program's text is Go's to use).
func readCoverage(stdout []byte, marker, _ string) ([]byte, *Coverage) {
	i := bytes.LastIndex(stdout, []byte(marker))
	if i < 0 {
		return stdout, &Coverage{Unavailable: "the tests' output held no coverage report (cut at the output limit, or the tests ended the process)"}
	}
	line := stdout[i+len(marker):]
	if j := bytes.IndexByte(line, '\n'); j >= 0 {
		line = line[:j]
	}
	rest := bytes.TrimSuffix(stdout[:i], []byte("\n"))
	var rep struct {
		Statements  int    `json:"statements"`
		Missing     []int  `json:"missing"`
		Unavailable string `json:"unavailable"`
	}
	if err := json.Unmarshal(line, &rep); err != nil {
		return rest, &Coverage{Unavailable: "the coverage report did not parse"}
	}
	if rep.Unavailable != "" {
		return rest, &Coverage{Unavailable: rep.Unavailable}
	}
	c := &Coverage{Statements: rep.Statements, Covered: rep.Statements - len(rep.Missing), MissedLines: rep.Missing}
	if c.MissedLines == nil {
		c.MissedLines = []int{}
	}
	c.setPercent()
	return rest, c
}

// setPercent sets Percent from Covered and Statements, to two decimals
// (100 when there is nothing to run).
func (c *Coverage) setPercent() {
	c.Percent = 100
	if c.Statements > 0 {
		c.Percent = math.Round(10000*float64(c.Covered)/float64(c.Statements)) / 100
	}
}
