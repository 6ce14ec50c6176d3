package main

import (
	"strings"
	"testing"
	"time"
)

// Durations and sizes out of their bounds are usage errors naming the flag,
// for every command, before anything runs.
func TestFlagBounds(t *testing.T) {
	_, model := modelServer(t)
	prog := writeProgram(t, "p.py", "print(1)\n")
	tasks := evalTasksFile(t)
	runArgs := func(extra ...string) []string {
		return append(append(append([]string{"run"}, model...), extra...), "x")
	}
	evalArgs := func(extra ...string) []string {
		return append(append([]string{"eval", "--tasks", tasks}, model...), extra...)
	}
	for _, c := range []struct {
		args []string
		flag string
	}{
		{[]string{"exec", "--timeout", "-1s", prog}, "-timeout"},
		{[]string{"exec", "--timeout", "0", prog}, "-timeout"},
		{[]string{"exec", "--timeout", "1000h", prog}, "-timeout"},
		{[]string{"exec", "--timeout", "soon", prog}, "-timeout"},
		{[]string{"exec", "--memory", "1KiB", prog}, "-memory"},
		{[]string{"exec", "--memory", "5TiB", prog}, "-memory"},
		{[]string{"exec", "--disk", "0", prog}, "-disk"},
		{[]string{"exec", "--cpus", "-1", prog}, "-cpus"},
		{runArgs("--timeout", "-5s"), "-timeout"},
		{runArgs("--llm-timeout", "-1s"), "-llm-timeout"},
		{runArgs("--llm-timeout", "0"), "-llm-timeout"},
		{runArgs("--llm-timeout", "100000h"), "-llm-timeout"},
		{runArgs("--max-answer", "10"), "-max-answer"},
		{runArgs("--max-answer", "1TiB"), "-max-answer"},
		{runArgs("--memory", "0"), "-memory"},
		{runArgs("--fresh-start-after", "-1"), "-fresh-start-after"},
		{evalArgs("--score-timeout", "0"), "-score-timeout"},
		{evalArgs("--task-timeout", "-1m"), "-task-timeout"},
		{evalArgs("--timeout", "48h"), "-timeout"},
		{[]string{"serve", "--shutdown-timeout", "-5s"}, "-shutdown-timeout"},
		{[]string{"serve", "--max-upload", "0"}, "-max-upload"},
		{[]string{"serve", "--session-max-size", "-1"}, "-session-max-size"},
		{[]string{"serve", "--llm-timeout", "-1s"}, "-llm-timeout"},
	} {
		code, _, stderr := runCLI(t, "", c.args...)
		if code != exitUsage || !strings.Contains(stderr, "invalid value") || !strings.Contains(stderr, "for flag "+c.flag+":") {
			first, _, _ := strings.Cut(stderr, "\n")
			t.Errorf("%v: exit %d, stderr %q; want %d naming %s", c.args, code, first, exitUsage, c.flag)
		}
	}
	// Zero where it means something is accepted, and so is the maximum.
	var d time.Duration
	for _, c := range []struct {
		b durationBounds
		v string
	}{{boundTaskTime, "0"}, {boundShutdown, "0s"}, {boundProgramTime, "24h"}, {boundRequestTime, "90s"}} {
		if err := (durationFlag{&d, c.b}).Set(c.v); err != nil {
			t.Errorf("%s: %v", c.v, err)
		}
	}
}
