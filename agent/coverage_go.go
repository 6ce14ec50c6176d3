package agent

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"path"
	"sort"
	"strconv"

	"github.com/codeagent/codeagent/internal/lazyre"
)

// goCoverScript reads the marker, the first line of its stdin, runs go
// test (with goTestFlags, the arguments after $2) on the program and its
// tests ($1, $2) with a cover profile in the sandbox's own /tmp, then
// prints the marker on a line of its own and the profile after it,
// keeping go test's status. The marker stays in the shell, a process
// apart from the tests, unexported.
const goCoverScript = `read -r m; a=$1 b=$2; shift 2; go test "$@" -coverprofile=/tmp/codeagent-cover.out "$a" "$b"; s=$?; ` +
	`printf '\n%s\n' "$m"; cat /tmp/codeagent-cover.out 2>/dev/null; exit $s`

// goCoverage is Go's runner command under coverage; its report's marker
// is the first line of its stdin.
func goCoverage(solution string) []string {
	return append([]string{"sh", "-c", goCoverScript, "sh", solution, ownFile(goTestFile)}, goTestFlags...)
}

// goProfileLine is one block of a cover profile:
// "/workspace/solution.go:6.11,8.3 1 0" (file, start line.col, end
// line.col, statements, count).
var goProfileLine = lazyre.New(`^(.+):(\d+)\.(\d+),(\d+)\.(\d+) (\d+) (\d+)$`)

// goCoverSummary is go test's own summary of coverage ("\tcoverage:
// 83.3% of statements"), which counts func main: the report read here is
// the one shown, so the summary is taken out (and kept with the report
// as cut).
var goCoverSummary = lazyre.New(`(?m)[ \t]*coverage: [0-9.]+% of statements$`)

// goBlock is a block of the solution file in a cover profile.
type goBlock struct {
	from, to [2]int // line, column
	run      bool
}

// readGoCoverage takes the cover profile after marker out of stdout and
// returns the rest (without go test's own summary of coverage), what it
// cut (the summary's lines, then the profile), and the coverage of
// program's statements: each
// statement (outside func main, which the tests do not run, as Python's
// `if __name__` block is left out) counts as run when the block holding
// its start ran. The missed lines are those of statements never run.
func readGoCoverage(stdout []byte, marker, program string) ([]byte, string, *Coverage) {
	i := bytes.LastIndex(stdout, []byte("\n"+marker+"\n"))
	if i < 0 {
		return stdout, "", &Coverage{Unavailable: "the tests' output held no coverage report (cut at the output limit, or the tests ended the process)"}
	}
	summary := goCoverSummary.Get().FindAll(stdout[:i], -1)
	rest, prof := goCoverSummary.Get().ReplaceAll(stdout[:i], nil), stdout[i+len(marker)+2:]
	report := string(append(bytes.Join(append(summary, nil), []byte("\n")), prof...))
	var blocks []goBlock
	for n, line := range bytes.Split(prof, []byte("\n")) {
		if n == 0 {
			if !bytes.HasPrefix(line, []byte("mode: ")) {
				return rest, report, &Coverage{Unavailable: "go test wrote no cover profile (the tests did not build or run)"}
			}
			continue
		}
		m := goProfileLine.FindSubmatch(line)
		if m == nil || path.Base(string(m[1])) != SolutionBase+".go" {
			continue
		}
		num := func(k int) int { v, _ := strconv.Atoi(string(m[k])); return v }
		blocks = append(blocks, goBlock{from: [2]int{num(2), num(3)}, to: [2]int{num(4), num(5)}, run: num(7) > 0})
	}
	stmts, err := goStatements(program)
	if err != nil {
		return rest, report, &Coverage{Unavailable: "the program did not parse: " + err.Error()}
	}
	c := &Coverage{MissedLines: []int{}, SelfReported: true}
	seen := map[int]bool{}
	for _, s := range stmts {
		in, run := false, false
		for _, b := range blocks {
			if !before(s, b.from) && !before(b.to, s) {
				in, run = true, run || b.run
			}
		}
		if !in {
			continue
		}
		c.Statements++
		if run {
			c.Covered++
		} else if !seen[s[0]] {
			seen[s[0]] = true
			c.MissedLines = append(c.MissedLines, s[0])
		}
	}
	sort.Ints(c.MissedLines)
	c.setPercent()
	return rest, report, c
}

// before reports whether position a (line, column) comes before b.
func before(a, b [2]int) bool { return a[0] < b[0] || a[0] == b[0] && a[1] < b[1] }

// goStatements are the start positions (line, column) of the program's
// statements outside func main: what go's cover counts, without the
// blocks, case clauses and empty statements that hold or mark others.
func goStatements(program string) ([][2]int, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, SolutionBase+".go", program, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	var out [][2]int
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil && fd.Name.Name == "main" {
			continue
		}
		ast.Inspect(d, func(n ast.Node) bool {
			switch n.(type) {
			case nil, *ast.BlockStmt, *ast.CaseClause, *ast.CommClause, *ast.EmptyStmt:
				return true
			case ast.Stmt:
				p := fset.Position(n.Pos())
				out = append(out, [2]int{p.Line, p.Column})
			}
			return true
		})
	}
	return out, nil
}
