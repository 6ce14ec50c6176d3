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
// for Python, go test's cover profile for Go). It is self-reported: the
// measure is taken inside the process that runs the program, which can
// change it, so it informs and never decides (see docs/RUN.md).
type Coverage struct {
	// Percent of the solution's statements that the tests ran.
	Percent    float64 `json:"percent"`
	Statements int     `json:"statements"`
	Covered    int     `json:"covered"`
	// MissedLines are the lines of the statements never run, in order.
	MissedLines []int `json:"missed_lines"`
	// SelfReported says that the program could have forged the measure:
	// true for every measure codeagent takes today.
	SelfReported bool `json:"self_reported,omitempty"`
	// Unavailable says why coverage was not measured (the sandbox has no
	// coverage module, the report was lost); the other fields are zero.
	Unavailable string `json:"unavailable,omitempty"`
}

// String is the human form: "83% (self-reported; lines 12-15 not run)",
// "100% (self-reported)", or "unavailable: ...".
func (c *Coverage) String() string {
	if c.Unavailable != "" {
		return "unavailable: " + c.Unavailable
	}
	var notes []string
	if c.SelfReported {
		notes = append(notes, "self-reported")
	}
	if len(c.MissedLines) > 0 {
		notes = append(notes, linesPhrase(c.MissedLines)+" not run")
	}
	s := formatPercent(c.Percent)
	if len(notes) > 0 {
		s += " (" + strings.Join(notes, "; ") + ")"
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

// pythonCoverageScript reads the report's marker, the first line of its
// stdin, then runs pytest (its arguments after the solution's name) under
// coverage.py, measuring the solution file only, without a data file or
// a configuration file, and prints the solution's statements and missed
// lines as JSON after the marker, last on stdout. The
// `if __name__ == "__main__":` block is left out: the tests import the
// program, its main work runs when the program itself does. Without the
// coverage module the tests still run and the report says so.
const pythonCoverageScript = `import json, os, sys
line = b""
while not line.endswith(b"\n"):
    b = os.read(0, 128)
    if not b:
        break
    line += b
src, marker, args = os.path.abspath(sys.argv[1]), line.decode().strip() + " ", sys.argv[2:]
del line
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

// pythonCoverage is the Python runner's command under coverage; its
// report's marker is the first line of its stdin.
func pythonCoverage(solution string) []string {
	return append([]string{"python3", "-c", pythonCoverageScript, solution}, pytestArgs...)
}

// newMarker is a fresh marker of a coverage report on stdout (128 random
// bits), given to the run on its stdin, not its argv or environment, so
// that a program can neither guess it nor read it where it reads its
// arguments.
func newMarker() string {
	var nonce [16]byte
	_, _ = rand.Read(nonce[:]) // crypto/rand.Read never fails (Go 1.24+)
	return "@@codeagent-coverage-" + hex.EncodeToString(nonce[:]) + "@@"
}

// readCoverage takes the report after marker out of stdout and returns
// the rest, as the tests printed it, the report as cut, and the coverage
// it reports (the program's text is Go's to use).
func readCoverage(stdout []byte, marker, _ string) ([]byte, string, *Coverage) {
	marker += " "
	i := bytes.LastIndex(stdout, []byte(marker))
	if i < 0 {
		return stdout, "", &Coverage{Unavailable: "the tests' output held no coverage report (cut at the output limit, or the tests ended the process)"}
	}
	line, after := stdout[i+len(marker):], []byte(nil)
	if j := bytes.IndexByte(line, '\n'); j >= 0 {
		line, after = line[:j], line[j+1:]
	}
	rest := append(bytes.TrimSuffix(stdout[:i:i], []byte("\n")), after...)
	report := string(line)
	var rep struct {
		Statements  int    `json:"statements"`
		Missing     []int  `json:"missing"`
		Unavailable string `json:"unavailable"`
	}
	if err := json.Unmarshal(line, &rep); err != nil {
		return rest, report, &Coverage{Unavailable: "the coverage report did not parse"}
	}
	if rep.Unavailable != "" {
		return rest, report, &Coverage{Unavailable: rep.Unavailable}
	}
	c := &Coverage{Statements: rep.Statements, Covered: rep.Statements - len(rep.Missing), MissedLines: rep.Missing, SelfReported: true}
	if c.MissedLines == nil {
		c.MissedLines = []int{}
	}
	c.setPercent()
	return rest, report, c
}

// setPercent sets Percent from Covered and Statements, to two decimals
// (100 when there is nothing to run).
func (c *Coverage) setPercent() {
	c.Percent = 100
	if c.Statements > 0 {
		c.Percent = math.Round(10000*float64(c.Covered)/float64(c.Statements)) / 100
	}
}
