package safety

import (
	"context"
	"slices"
	"testing"
	"time"
)

// BenchmarkLint measures what lint adds to a check: the checker with lint
// and without (NoLint), interleaved program by program (alternating which
// goes first), over the HumanEval prompts with their canonical solutions,
// the programs an attempt checks. It reports the medians over programs of
// each program's median time, and the median of the per-program
// differences.
func BenchmarkLint(b *testing.B) {
	progs := humanEvalPrograms(b)
	if bench, err := readBenchFile(); err == nil {
		progs = append(progs, string(bench))
	}
	on := newTestChecker(b)
	off := newTestChecker(b)
	off.NoLint = true
	ctx := context.Background()
	times := [2][][]time.Duration{make([][]time.Duration, len(progs)), make([][]time.Duration, len(progs))}
	run := func(c *Checker, code []byte) time.Duration {
		t0 := time.Now()
		if _, err := c.Check(ctx, Python, code); err != nil {
			b.Fatal(err)
		}
		return time.Since(t0)
	}
	codes := make([][]byte, len(progs))
	for i, p := range progs {
		codes[i] = []byte(p)
	}
	n := 0
	for b.Loop() {
		for i, code := range codes {
			if (n+i)%2 == 0 {
				times[0][i] = append(times[0][i], run(on, code))
				times[1][i] = append(times[1][i], run(off, code))
			} else {
				times[1][i] = append(times[1][i], run(off, code))
				times[0][i] = append(times[0][i], run(on, code))
			}
		}
		n++
	}
	var med [2][]time.Duration
	var diff []time.Duration
	for i := range codes {
		a, z := median(times[0][i]), median(times[1][i])
		med[0], med[1] = append(med[0], a), append(med[1], z)
		diff = append(diff, a-z)
	}
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	b.ReportMetric(us(median(med[0])), "µs/check-lint")
	b.ReportMetric(us(median(med[1])), "µs/check-nolint")
	b.ReportMetric(us(median(diff)), "µs-added-median")
	b.ReportMetric(us(slices.Max(diff)), "µs-added-max")
	b.ReportMetric(float64(len(codes)), "programs")
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}
