package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// traceFailing divides by a local that is 0; its repair request should
// show the values of average's locals, which the code itself does not.
const traceFailing = `def average(values):
    total = sum(values)
    count = 0
    return total / count


print(average([5, 5, 7]))
`

// TestRunTraceShowsLocals: a program that fails with ZeroDivisionError
// inside a function gets a repair request that shows the function's
// locals with their values (total = 17, values = [5, 5, 7]), in the
// namespace sandbox and in Docker; with --no-trace it does not. Neither
// the user's output nor the recorded stderr carries the trace.
func TestRunTraceShowsLocals(t *testing.T) {
	forBackends(t, func(t *testing.T, backend string) {
		for _, noTrace := range []bool{false, true} {
			srv, flags := modelServer(t, pyAnswer(traceFailing), pyAnswer("print(round(17 / 3, 2))\n"))
			args := append(append([]string{"run"}, flags...), "--backend", backend, "--mode", "program", "--no-verify", "--no-folder", "--json")
			if noTrace {
				args = append(args, "--no-trace")
			}
			code, stdout, stderr := runBinary(t, "", nil, append(args, "print the average of 5, 5 and 7")...)
			var res struct {
				Success bool
				Output  string
				History []struct {
					Result struct{ Stderr string }
				}
			}
			if err := json.Unmarshal([]byte(stdout), &res); err != nil || code != exitOK || !res.Success || len(res.History) != 2 {
				t.Fatalf("exit %d, %v\nstdout %s\nstderr %s", code, err, stdout, stderr)
			}
			failed := res.History[0].Result.Stderr
			if !strings.HasSuffix(failed, "ZeroDivisionError: division by zero\n") || !strings.Contains(failed, `File "/workspace/.codeagent/solution.py", line 4, in average`) ||
				strings.Contains(failed, "<string>") {
				t.Errorf("the failed attempt's stderr is not the program's traceback:\n%s", failed)
			}
			if strings.Contains(stdout+stderr, "codeagent trace") {
				t.Errorf("the trace's markers reached the user:\nstdout %s\nstderr %s", stdout, stderr)
			}
			body := string(srv.Requests()[1].Body)
			shown := []string{"Values at the point of failure", "in average(), line 4:", "total = 17", "values = [5, 5, 7]"}
			for _, want := range shown {
				if got := strings.Contains(body, want); got == noTrace {
					t.Errorf("--no-trace %v: the repair request shows %q: %v\n%s", noTrace, want, got, body)
				}
			}
			if !strings.Contains(body, "ZeroDivisionError: division by zero") || strings.Contains(body, "codeagent trace") {
				t.Errorf("the repair request lacks the traceback or shows the markers:\n%s", body)
			}
		}
	})
}
