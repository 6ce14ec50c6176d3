//go:build linux && (amd64 || arm64)

package namespace

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/codeagent/codeagent/lang"
	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/sandbox/sandboxtest"
)

// Execution traces (lang.TracedCommand): the agent runs Python programs
// through a runner that reports the values of the failing frames. These
// tests hold it to running programs as `python3 FILE` does, cold and in
// the warm interpreters, and to its bounds.

// runTraceCase runs tc's program with command (its file and arguments
// appended) on sb and returns the result, its trace split off, and the
// files tc names. A traced command gets a fresh key before tc's stdin.
func runTraceCase(t *testing.T, sb *Backend, tc warmCase, command func(path string) []string) (sandbox.Result, string, string) {
	t.Helper()
	ws := t.TempDir()
	for name, data := range tc.files {
		p := filepath.Join(ws, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	py, _ := lang.Lookup("python")
	env := map[string]string{}
	for k, v := range py.Env {
		env[k] = v
	}
	for k, v := range tc.env {
		env[k] = v
	}
	argv := tc.command
	if argv == nil {
		argv = []string{"python3", "/code/main.py"}
	}
	spec := sandbox.Spec{Command: append(command(argv[1]), argv[2:]...), Workspace: ws, Env: env, Limits: sandbox.Limits{WallTime: 20 * time.Second}}
	if tc.code != "" {
		spec.Files = []sandbox.File{{Path: "/code/main.py", Data: []byte(tc.code)}}
	}
	var key lang.TraceKey
	if spec.Command[1] == "-c" {
		key = lang.NewTraceKey()
		spec.Stdin = strings.NewReader(string(key.Stdin()) + tc.stdin)
	} else if tc.stdin != "" {
		spec.Stdin = strings.NewReader(tc.stdin)
	}
	res, err := sb.Run(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	var trace string
	res.Stderr, trace = key.Split(res.Stderr)
	var files []string
	for _, name := range tc.outputs {
		b, err := os.ReadFile(filepath.Join(ws, name))
		files = append(files, name+"="+string(b)+errString(err))
	}
	return res, trace, strings.Join(files, "\n")
}

// TestWarmTracedMatchesPlain runs each program of the warm cases that is
// a file plainly (python3 FILE, cold), traced cold and traced warm: the
// traced runs, their traces set aside, do what the plain one did (status,
// exit code, signal, stdout, stderr with its traceback, files written),
// the warm one runs warm, and only a failure has a trace: f(0)'s shows
// x = 0 (g() and the module hold no values to show).
func TestWarmTracedMatchesPlain(t *testing.T) {
	warmB := newWarmBackend(t, 1)
	warmB.warm.Fill()
	cold, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer cold.Close()
	py, _ := lang.Lookup("python")
	plain := func(path string) []string { return py.Command(path) }
	for _, tc := range warmCases {
		if tc.command != nil && strings.HasPrefix(tc.command[1], "-") {
			continue // -m and -c are not what the agent traces
		}
		t.Run(tc.name, func(t *testing.T) {
			p, pTrace, pf := runTraceCase(t, cold, tc, plain)
			c, cTrace, cf := runTraceCase(t, cold, tc, py.TracedCommand)
			warmB.quiesce()
			before := warmB.WarmRuns()
			w, wTrace, wf := runTraceCase(t, warmB, tc, py.TracedCommand)
			if warmB.WarmRuns() != before+1 {
				t.Fatal("the traced program did not run warm")
			}
			same := func(what string, a, b, c any) {
				sa, sb, sc := address.ReplaceAllString(toString(a), "0x"), address.ReplaceAllString(toString(b), "0x"), address.ReplaceAllString(toString(c), "0x")
				if sa != sb || sa != sc {
					t.Errorf("%s differs:\nplain:       %s\ntraced cold: %s\ntraced warm: %s", what, sa, sb, sc)
				}
			}
			same("status", p.Status, c.Status, w.Status)
			same("exit code", p.ExitCode, c.ExitCode, w.ExitCode)
			same("signal", p.Signal, c.Signal, w.Signal)
			same("stdout", p.Stdout, c.Stdout, w.Stdout)
			same("stderr", p.Stderr, c.Stderr, w.Stderr)
			same("files", pf, cf, wf)
			same("trace", cTrace, wTrace, cTrace)
			failed := strings.Contains(string(p.Stderr), "Traceback") && !strings.Contains(tc.name, "KeyboardInterrupt")
			switch {
			case pTrace != "":
				t.Errorf("a plain run has a trace: %q", pTrace)
			case tc.name == "Traceback" && cTrace != "in f(), line 2:\n    x = 0\n":
				t.Errorf("the trace of f(0) is %q", cTrace)
			case !failed && cTrace != "":
				t.Errorf("%s has a trace: %q", tc.name, cTrace)
			}
		})
	}
}

// traceBoundsProgram fails with a frame of 50 locals, one a 10 KB string,
// after a frame whose values cannot be shown plainly.
var traceBoundsProgram = `import pandas as pd
class Bad:
    def __repr__(self):
        raise ValueError("no repr for you")
class Slow:
    def __repr__(self):
        while True:
            pass
def odd():
    bad, slow, df = Bad(), Slow(), pd.DataFrame({"a": [1, 2, 3], "b": [4, 5, 6]})
    wide()
def wide():
    big = "x" * 10240
` + wideLocals + `    return 1 / 0
limit = 3
odd()
`

// wideLocals are 49 assignments, v00 = 0 to v48 = 48.
var wideLocals = func() string {
	var b strings.Builder
	for i := range 49 {
		fmt.Fprintf(&b, "    v%02d = %d\n", i, i)
	}
	return b.String()
}()

// TestWarmTraceBounded: a trace shows at most 20 names a frame, each
// value cut to 200 characters, says how many names it left out, shows a
// repr that raises and one that does not end as such, and a DataFrame by
// its columns; warm as cold.
func TestWarmTraceBounded(t *testing.T) {
	warmB := newWarmBackend(t, 1)
	warmB.warm.Fill()
	py, _ := lang.Lookup("python")
	tc := warmCase{code: traceBoundsProgram}
	for _, sb := range []*Backend{warmB, newTestBackend(t)} {
		warmB.quiesce()
		res, trace, _ := runTraceCase(t, sb, tc, py.TracedCommand)
		if res.ExitCode != 1 || !strings.HasSuffix(string(res.Stderr), "ZeroDivisionError: division by zero\n") {
			t.Fatalf("exit %d, stderr %s", res.ExitCode, res.Stderr)
		}
		frames := regexp.MustCompile(`(?m)^in `).Split(trace, -1)[1:]
		if len(frames) != 3 || !strings.HasPrefix(frames[0], "<module>, line 65:") || !strings.HasPrefix(frames[1], "odd(), line 11:") || !strings.HasPrefix(frames[2], "wide(), line 63:") {
			t.Fatalf("frames:\n%s", trace)
		}
		for _, want := range []string{"    bad = <repr raised ValueError: no repr for you>\n", "    slow = <repr took too long>\n",
			"    df = <DataFrame, 3 rows, columns ['a', 'b']>\n"} {
			if !strings.Contains(frames[1], want) {
				t.Errorf("odd() lacks %q:\n%s", want, frames[1])
			}
		}
		lines := strings.Split(strings.TrimSuffix(frames[2], "\n"), "\n")[1:]
		if len(lines) != 21 || lines[20] != "    ... and 30 more names" || !strings.HasPrefix(lines[0], "    big = 'xxx") || lines[19] != "    v18 = 18" {
			t.Fatalf("wide() shows %d lines:\n%s", len(lines), frames[2])
		}
		if v := strings.TrimPrefix(lines[0], "    big = "); len(v) != 200 {
			t.Errorf("the 10 KB string shows as %d characters, want 200: %s", len(v), v)
		}
	}
	if warmB.WarmRuns() != 1 {
		t.Errorf("%d warm runs, want 1", warmB.WarmRuns())
	}
}

// BenchmarkTrace compares, interleaved in one run (ABBA), a program run
// plainly (python3 /workspace/solution.py) and traced, each on a backend
// of its own as the agent keeps one (two sandboxes started ahead, a warm
// interpreter): a small program that succeeds and one that fails inside
// a function, cold (standard library only) and warm (pandas). It reports
// the medians and the median of the paired differences (cost-ms).
func BenchmarkTrace(b *testing.B) {
	const body = "def average(values):\n    total = sum(values)\n    count = %s\n    return total / count\n\n\nprint(average([5, 5, 7]))\n"
	for _, c := range []struct {
		name, prelude string
		imports       []string
	}{{"cold", "import json\n", []string{"json"}}, {"warm", "import pandas as pd\ndf = pd.DataFrame({'a': [1, 2]})\n", []string{"pandas"}}} {
		for _, fail := range []bool{false, true} {
			name := c.name + "/ok"
			count := "len(values)"
			if fail {
				name, count = c.name+"/fail", "0"
			}
			b.Run(name, func(b *testing.B) {
				benchTrace(b, c.prelude+fmt.Sprintf(body, count), c.imports, c.name == "warm", fail)
			})
		}
	}
}

func benchTrace(b *testing.B, code string, imports []string, warm, fail bool) {
	py, _ := lang.Lookup("python")
	ws := b.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "solution.py"), []byte(code), 0o644); err != nil {
		b.Fatal(err)
	}
	const path = sandbox.WorkspacePath + "/solution.py"
	var sbs [2]*Backend
	for i := range sbs {
		sb, err := New(Config{Warm: 2, WarmPython: 1})
		if err != nil {
			b.Fatal(err)
		}
		defer sb.Close()
		sbs[i] = sb
	}
	commands := [2][]string{py.Command(path), py.TracedCommand(path)}
	run := func(i int) time.Duration {
		sb := sbs[i]
		if sb.warm != nil {
			sb.warm.Fill()
		}
		sb.quiesce()
		before := sb.WarmRuns()
		spec := sandbox.Spec{Command: commands[i], Workspace: ws, Env: py.Env, Imports: imports}
		var key lang.TraceKey
		if i == 1 { // as the agent runs it: a fresh key on stdin
			key = lang.NewTraceKey()
			spec.Stdin = bytes.NewReader(key.Stdin())
		}
		t0 := time.Now()
		res, err := sb.Run(context.Background(), spec)
		d := time.Since(t0)
		stderr, trace := key.Split(res.Stderr)
		switch {
		case err != nil || (res.Status == sandbox.StatusOK) == fail:
			b.Fatalf("run: %v %s %s", err, res.Status, res.Stderr)
		case (trace != "") != (fail && i == 1):
			b.Fatalf("trace %q (stderr %s)", trace, stderr)
		case warm && sb.warm != nil && sb.WarmRuns() != before+1:
			b.Fatal("the program ran cold")
		}
		return d
	}
	var plain, traced, diff []time.Duration
	b.ResetTimer()
	for n := range b.N {
		var t [2]time.Duration
		for k := range 2 {
			i := (n + k) % 2 // ABBA: plain first, then traced first
			t[i] = run(i)
		}
		plain, traced, diff = append(plain, t[0]), append(traced, t[1]), append(diff, t[1]-t[0])
	}
	b.ReportMetric(float64(median(plain).Microseconds())/1000, "plain-median-ms")
	b.ReportMetric(float64(median(traced).Microseconds())/1000, "traced-median-ms")
	b.ReportMetric(float64(median(diff).Microseconds())/1000, "cost-ms")
}

// TestTraceKeyOutOfReachWarm: the conformance suite's attack on a traced
// run's key (sandboxtest.TraceKeyOutOfReach) in a warm interpreter, whose
// stdin holds the loader's request before the key.
func TestTraceKeyOutOfReachWarm(t *testing.T) {
	warmB := newWarmBackend(t, 1)
	warmB.warm.Fill()
	warmB.quiesce()
	sandboxtest.TraceKeyOutOfReach(t, warmB)
	if warmB.WarmRuns() != 1 {
		t.Errorf("%d warm runs, want 1", warmB.WarmRuns())
	}
}
